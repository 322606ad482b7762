// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/wait"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/kedascaler"
)

// tlsServer is the fleet's scaler served over TLS on 127.0.0.1.
type tlsServer struct {
	addr  string
	roots *x509.CertPool
	reg   *prometheus.Registry
}

// serveTLS serves the fleet over TLS with opts until the test ends.
func serveTLS(t *testing.T, opts ...kedascaler.Option) *tlsServer {
	t.Helper()
	ca := issue(t, "test-ca", nil, true, false)
	certs := &staticCerts{}
	certs.set(issue(t, "scaler", ca, false, true))
	tlsCfg, err := kedascaler.ServerTLS(certs, "")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv := listenAndServe(t, tlsCfg, fleetScaler(t), reg, opts...)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	return &tlsServer{addr: srv.Addr().String(), roots: roots, reg: reg}
}

// client is a gRPC client of s over TLS, closed when the test ends.
func (s *tlsServer) client(t *testing.T) (pb.ExternalScalerClient, *grpc.ClientConn) {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewExternalScalerClient(conn), conn
}

// dialTLS finishes a TLS handshake with s, offering HTTP/2.
func (s *tlsServer) dialTLS(timeout time.Duration) (*tls.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", s.addr, &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
}

// dialH2 opens a TLS connection to s that speaks HTTP/2 by hand: the
// client preface and an empty SETTINGS frame are sent, so that a test can
// send what a gRPC client would not.
func (s *tlsServer) dialH2(timeout time.Duration) (*tls.Conn, *http2.Framer, error) {
	c, err := s.dialTLS(timeout)
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	fr := http2.NewFramer(c, c)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	if err := fr.WriteSettings(); err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, fr, nil
}

// heapInUse is the heap's live bytes after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func growth(before, after uint64) int64 { return int64(after) - int64(before) }

const mib = 1 << 20

// busy is a trigger whose value is measured and active: its stream stays
// open.
func busy() *pb.ScaledObjectRef {
	return ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm"))
}

// padBin is gRPC metadata that HPACK carries in a few KB and that the
// server decodes to about 9 MB (12 MB of header list): one 3,000-byte -bin value (4,000 bytes of
// base64) repeated 3,000 times, each repeat a one-byte reference to the
// connection's HPACK table, each decoded into 3,000 bytes of its own. The
// header list is under gRPC's default limit of 16 MiB.
func padBin() (key, value string, n int) {
	return "x-pad-bin", base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, 3000)), 3000
}

// TestLargeMetadataIsBounded: streams that carry large metadata are
// refused before the server keeps it, whether the client honours the
// server's advertised header-list limit (a gRPC client) or ignores it (a
// hand-written HTTP/2 client). Without a limit, 20 such StreamIsActive
// streams held about 250 MiB of heap.
func TestLargeMetadataIsBounded(t *testing.T) {
	const streams = 20
	const bound = 32 * mib
	key, value, n := padBin()

	t.Run("gRPC client", func(t *testing.T) {
		s := serveTLS(t)
		client, _ := s.client(t)
		// One call first, so that the connection and the scaler's caches
		// are up before the heap is measured.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := client.IsActive(ctx, busy()); err != nil {
			t.Fatal(err)
		}
		before := heapInUse()
		g0 := runtime.NumGoroutine()
		pad := make([]string, n)
		for i := range pad {
			pad[i] = value
		}
		refused := 0
		for range streams {
			sctx := metadata.NewOutgoingContext(ctx, metadata.MD{key: pad})
			st, err := client.StreamIsActive(sctx, busy())
			if err == nil {
				_, err = st.Recv()
			}
			if err != nil {
				if refused == 0 {
					t.Logf("first refusal: %v", err)
				}
				refused++
			}
		}
		after := heapInUse()
		t.Logf("%d streams with %d KB of decoded metadata each: %d refused; heap %+.1f MiB, goroutines %+d",
			streams, n*3000/1000, refused, float64(growth(before, after))/mib, runtime.NumGoroutine()-g0)
		if g := growth(before, after); g > bound {
			t.Errorf("heap grew by %.1f MiB while the streams are open, want under %d MiB", float64(g)/mib, bound/mib)
		}
		cancel()
	})

	t.Run("client ignoring the limit", func(t *testing.T) {
		s := serveTLS(t)
		c, fr, err := s.dialH2(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		before := heapInUse()
		var block bytes.Buffer
		enc := hpack.NewEncoder(&block)
		for id := uint32(1); id < 2*streams; id += 2 {
			block.Reset()
			for _, f := range []hpack.HeaderField{
				{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
				{Name: ":path", Value: "/externalscaler.ExternalScaler/StreamIsActive"},
				{Name: ":authority", Value: s.addr}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
			} {
				_ = enc.WriteField(f)
			}
			for range n {
				_ = enc.WriteField(hpack.HeaderField{Name: key, Value: value})
			}
			// No request message: the stream waits for it, holding what
			// the server kept of its headers.
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
				t.Fatalf("stream %d: %v", id, err)
			}
		}
		reset := map[uint32]http2.ErrCode{}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		for len(reset) < streams {
			f, err := fr.ReadFrame()
			if err != nil {
				break
			}
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				reset[f.StreamID] = f.ErrCode
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = fr.WritePing(true, f.Data)
				}
			}
		}
		after := heapInUse()
		t.Logf("%d streams with %d KB of decoded metadata each: %d reset; heap %+.1f MiB", streams, n*3000/1000, len(reset), float64(growth(before, after))/mib)
		if len(reset) != streams {
			t.Errorf("%d of %d streams reset, want all: %v", len(reset), streams, reset)
		}
		if g := growth(before, after); g > bound {
			t.Errorf("heap grew by %.1f MiB while the streams are open, want under %d MiB", float64(g)/mib, bound/mib)
		}
	})
}

// raiseOpenFiles raises the soft limit on open files to the hard one and
// returns it.
func raiseOpenFiles(t *testing.T) uint64 {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		old := lim.Cur
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Logf("raising RLIMIT_NOFILE: %v", err)
			lim.Cur = old
		} else {
			t.Cleanup(func() {
				lim.Cur = old
				_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
			})
		}
	}
	return lim.Cur
}

// TestIdleConnectionsAreBounded: thousands of idle TLS connections (the
// HTTP/2 preface sent, then nothing) are not all held: past the connection
// limit they are closed as accepted, and the server's goroutines and heap
// stay small. Without a limit, each held three goroutines and about 64 KB.
func TestIdleConnectionsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of connections")
	}
	files := raiseOpenFiles(t)
	conns := 3000
	if fit := int(files)/2 - 200; fit < conns { // both ends are in this process
		conns = fit
	}
	if conns < 500 {
		t.Skipf("RLIMIT_NOFILE %d allows only %d connections", files, conns)
	}
	limits := kedascaler.DefaultLimits()
	s := serveTLS(t)
	before := heapInUse()
	g0 := runtime.NumGoroutine()

	var (
		mu       sync.Mutex
		open     []net.Conn
		refused  int
		firstErr error
	)
	t.Cleanup(func() {
		for _, c := range open {
			_ = c.Close()
		}
	})
	work := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				c, fr, err := s.dialH2(5 * time.Second)
				if err == nil {
					// The server's SETTINGS: its transport is up.
					_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
					_, err = fr.ReadFrame()
					_ = c.SetReadDeadline(time.Time{})
					if err != nil {
						_ = c.Close()
					}
				}
				mu.Lock()
				if err == nil {
					open = append(open, c)
				} else {
					refused++
					if firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	for range conns {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	after := heapInUse()
	goroutines := runtime.NumGoroutine() - g0
	t.Logf("%d connections in %s: %d held, %d refused (first: %v); goroutines %+d, heap %+.1f MiB (both ends)",
		conns, time.Since(start).Round(time.Millisecond), len(open), refused, firstErr, goroutines, float64(growth(before, after))/mib)
	if len(open) > limits.MaxConnections {
		t.Errorf("%d connections held, want at most %d", len(open), limits.MaxConnections)
	}
	if want := 4*limits.MaxConnections + 100; goroutines > want {
		t.Errorf("%d more goroutines, want under %d", goroutines, want)
	}
	if g := growth(before, after); g > 32*mib {
		t.Errorf("heap grew by %.1f MiB, want under 32 MiB", float64(g)/mib)
	}
}

// TestCallsOverTheCapAreRefused: calls and streams in flight count
// against one cap over all connections, a unary call whose request never
// arrives included; a call past it gets ResourceExhausted at once, and a
// slot is free again when a call ends.
func TestCallsOverTheCapAreRefused(t *testing.T) {
	limits := kedascaler.DefaultLimits()
	limits.MaxStreams = 4
	s := serveTLS(t, kedascaler.WithLimits(limits))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Two streams on one connection, as KEDA's external-push triggers hold.
	streamsClient, _ := s.client(t)
	var cancels []context.CancelFunc
	for range 2 {
		sctx, scancel := context.WithCancel(ctx)
		cancels = append(cancels, scancel)
		st, err := streamsClient.StreamIsActive(sctx, busy())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	// Two unary calls on another connection whose request never comes.
	_, stalledConn := s.client(t)
	for range 2 {
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		if _, err := stalledConn.NewStream(sctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/externalscaler.ExternalScaler/IsActive"); err != nil {
			t.Fatal(err)
		}
	}

	client, _ := s.client(t)
	var err error
	if perr := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, err = client.IsActive(ctx, busy())
		return status.Code(err) == codes.ResourceExhausted, nil
	}); perr != nil {
		t.Fatalf("IsActive with 4 calls in flight, for 5s: last %v, want ResourceExhausted", err)
	}
	if _, err := client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: busy(), MetricName: "inference_queue_size"}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("GetMetrics: %v, want ResourceExhausted", err)
	}
	st, err := client.StreamIsActive(ctx, busy())
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("StreamIsActive: %v, want ResourceExhausted", err)
	}

	cancels[0]() // one stream ends: its slot is free
	if perr := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, err = client.IsActive(ctx, busy())
		return err == nil, nil
	}); perr != nil {
		t.Errorf("IsActive after a stream ended, for 5s: last %v, want OK", err)
	}
}

// readUntilClosed reads c until it fails, for at most limit; it returns the
// error (io.EOF or a reset when the server closed c, a timeout otherwise).
func readUntilClosed(c net.Conn, limit time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(limit))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return err
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// TestHandshakeTimeoutDropsSilentClients: a client that opens TCP and
// never finishes the TLS handshake, or finishes it and never sends the
// HTTP/2 preface, is dropped after the handshake timeout instead of
// holding its connection (and its slot) for gRPC's default 120 s.
func TestHandshakeTimeoutDropsSilentClients(t *testing.T) {
	limits := kedascaler.DefaultLimits()
	limits.HandshakeTimeout = 200 * time.Millisecond
	s := serveTLS(t, kedascaler.WithLimits(limits))
	cases := []struct {
		name string
		dial func() (net.Conn, error)
	}{
		{name: "TCP, no TLS handshake", dial: func() (net.Conn, error) { return net.DialTimeout("tcp", s.addr, 5*time.Second) }},
		{name: "TLS, no HTTP/2 preface", dial: func() (net.Conn, error) { return s.dialTLS(5 * time.Second) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := readUntilClosed(c, 5*time.Second); isTimeout(err) {
				t.Errorf("connection still open after 5s with a handshake timeout of %s", limits.HandshakeTimeout)
			}
		})
	}
}

// TestIdleConnectionClosed: a connection without calls is sent GOAWAY and
// closed after MaxConnectionIdle.
func TestIdleConnectionClosed(t *testing.T) {
	limits := kedascaler.DefaultLimits()
	limits.MaxConnectionIdle = 300 * time.Millisecond
	s := serveTLS(t, kedascaler.WithLimits(limits))
	c, fr, err := s.dialH2(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	goAway := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if isTimeout(err) {
				t.Fatalf("idle connection open after 5s with MaxConnectionIdle %s (GOAWAY seen: %v)", limits.MaxConnectionIdle, goAway)
			}
			break // closed by the server
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goAway = true
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		}
	}
	if !goAway {
		t.Error("closed without GOAWAY")
	}
}

// h2Writer sends DATA within the connection's flow-control window, reading
// the server's frames (window updates, settings, pings) when it is spent.
type h2Writer struct {
	c      *tls.Conn
	fr     *http2.Framer
	window int64
	resets int
}

func (w *h2Writer) readFrame(limit time.Duration) error {
	_ = w.c.SetReadDeadline(time.Now().Add(limit))
	f, err := w.fr.ReadFrame()
	if err != nil {
		return err
	}
	switch f := f.(type) {
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			w.window += int64(f.Increment)
		}
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return w.fr.WriteSettingsAck()
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			return w.fr.WritePing(true, f.Data)
		}
	case *http2.RSTStreamFrame:
		w.resets++
	case *http2.GoAwayFrame:
		return fmt.Errorf("GOAWAY: %v", f.ErrCode)
	}
	return nil
}

func (w *h2Writer) data(id uint32, p []byte) error {
	for len(p) > 0 {
		for w.window <= 0 {
			if err := w.readFrame(5 * time.Second); err != nil {
				return err
			}
		}
		n := min(int64(len(p)), w.window, 16<<10)
		if err := w.fr.WriteData(id, false, p[:n]); err != nil {
			return err
		}
		w.window -= n
		p = p[n:]
	}
	return nil
}

// TestWorstCaseFitsTheBudget: the port at its limits, with every call as
// large as they allow (headers just under the header-list limit, a request
// message at the size limit still arriving), holds no more heap than
// Limits.WorstCaseBytes, the figure the adapter's memory budget counts.
func TestWorstCaseFitsTheBudget(t *testing.T) {
	limits := kedascaler.DefaultLimits()
	s := serveTLS(t)
	before := heapInUse()
	g0 := runtime.NumGoroutine()

	const msgSize = 64 << 10 // the request size limit
	perConn := limits.MaxStreams / limits.MaxConnections
	var writers []*h2Writer
	t.Cleanup(func() {
		for _, w := range writers {
			_ = w.c.Close()
		}
	})
	// A request message of msgSize bytes, all but one of which fit the
	// stream's window: the server holds its buffer, waiting.
	unaryArriving := make([]byte, 5+msgSize-6)
	binary.BigEndian.PutUint32(unaryArriving[1:], msgSize)
	// A StreamIsActive request near the size limit, its metadata in 60
	// keys, never followed by the end of the request stream: the server
	// holds it decoded while it waits for that end.
	big := ref("team-a", map[string]string{})
	for k := range 60 {
		big.ScalerMetadata[fmt.Sprintf("key%02d", k)] = string(bytes.Repeat([]byte{'v'}, 1000))
	}
	req, err := proto.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(req) > msgSize {
		t.Fatalf("request of %d bytes, over the limit", len(req))
	}
	streamHeld := make([]byte, 5+len(req))
	binary.BigEndian.PutUint32(streamHeld[1:], uint32(len(req)))
	copy(streamHeld[5:], req)
	id := uint32(1)
	var block bytes.Buffer
	for range limits.MaxConnections {
		c, fr, err := s.dialH2(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		w := &h2Writer{c: c, fr: fr, window: 65535}
		writers = append(writers, w)
		enc := hpack.NewEncoder(&block)
		for i := range perConn {
			// Half the calls are IsActive calls whose request is still
			// arriving, half StreamIsActive streams holding theirs.
			path, msg := "/externalscaler.ExternalScaler/IsActive", unaryArriving
			if i%2 == 1 {
				path, msg = "/externalscaler.ExternalScaler/StreamIsActive", streamHeld
			}
			block.Reset()
			pad := make([]byte, 5800)
			binary.BigEndian.PutUint32(pad, id) // no two alike
			for _, f := range []hpack.HeaderField{
				{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"}, {Name: ":path", Value: path},
				{Name: ":authority", Value: s.addr}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
				{Name: "x-pad-bin", Value: base64.RawStdEncoding.EncodeToString(pad)},
			} {
				_ = enc.WriteField(f)
			}
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			if err := w.data(id, msg); err != nil {
				t.Fatalf("stream %d: %v", id, err)
			}
			id += 2
		}
	}
	// Let the server read what was sent; a stream it refused or reset
	// would make the figure too low.
	for _, w := range writers {
		for w.readFrame(50*time.Millisecond) == nil {
		}
		if w.resets > 0 {
			t.Fatalf("%d streams reset: the test's calls must stay within the limits", w.resets)
		}
	}
	after := heapInUse()
	g := growth(before, after)
	t.Logf("%d connections, %d calls with %d-byte headers, a %d-byte request arriving or held: heap %+.1f MiB (both ends), goroutines %+d; budget %.1f MiB",
		limits.MaxConnections, perConn*limits.MaxConnections, 8<<10, msgSize, float64(g)/mib, runtime.NumGoroutine()-g0, float64(limits.WorstCaseBytes())/mib)
	if g > limits.WorstCaseBytes() {
		t.Errorf("heap grew by %.1f MiB, more than the budget's %.1f MiB", float64(g)/mib, float64(limits.WorstCaseBytes())/mib)
	}
}
