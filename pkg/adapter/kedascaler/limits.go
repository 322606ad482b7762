// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"k8s.io/klog/v2"
)

// Limits bound what the clients of the scaler's port can hold: KEDA's
// operator keeps a few connections (one per scaler address and TLS
// settings), a call per trigger poll and a stream per external-push
// trigger, with small metadata. Whatever a client sends, the port's memory
// stays under WorstCaseBytes.
type Limits struct {
	// MaxConnections is the most connections open at once, TLS handshakes
	// included; a connection accepted past it is closed at once (reset),
	// never queued.
	MaxConnections int
	// MaxStreams is the most calls and streams in flight at once over all
	// connections, counted from their headers (a call whose request is
	// still arriving counts); a call past it is refused with
	// ResourceExhausted at once.
	MaxStreams int
	// HandshakeTimeout is how long a new connection has to finish its TLS
	// handshake and HTTP/2 preface.
	HandshakeTimeout time.Duration
	// MaxConnectionIdle closes a connection (GOAWAY) after that long
	// without a call or stream.
	MaxConnectionIdle time.Duration
	// MaxConnectionAge closes a connection that old (GOAWAY); its open
	// streams then have MaxConnectionAgeGrace to end before they are cut
	// (KEDA opens a new StreamIsActive stream).
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration
}

// Defaults of Limits, and bounds that are not settings: KEDA's calls are
// small.
const (
	DefaultMaxConnections = 64
	DefaultMaxStreams     = 256
	// MaxLimit is the largest MaxConnections and MaxStreams.
	MaxLimit = 1 << 16

	// maxHeaderListSize bounds a call's headers (HTTP/2's header-list
	// size: names, values and 32 bytes per field, as decoded). gRPC's
	// default is 16 MiB, in which HPACK references and -bin values make a
	// few KB on the wire into megabytes kept for the life of a stream.
	// KEDA sends the ScaledObjectRef in the request message; its headers
	// are gRPC's own (path, authority, content type, user agent, timeout,
	// a trace context), a few hundred bytes. 8 KiB is gRPC's coming
	// default.
	maxHeaderListSize = 8 << 10
	// maxRecvMsgSize bounds a request message. The largest valid
	// ScaledObjectRef is about 35 KB: 32 metadata keys (maxKeys) of at
	// most 1,024 bytes (maxValueLen), a name and a namespace.
	maxRecvMsgSize = 64 << 10
	// windowSize is HTTP/2's flow-control window of a stream and of a
	// connection: what a client can send that the server has not read
	// yet. Setting it turns off gRPC's window growth (up to 16 MiB a
	// stream when the bandwidth-delay product looks large).
	windowSize = 64 << 10
	// Keepalive pings find a dead peer of a connection with a stream.
	pingInterval = time.Minute
	pingTimeout  = 20 * time.Second

	// perConnectionBytes and perStreamBytes are the heap one connection
	// and one call hold at worst, with room: a connection's buffers
	// (gRPC's 32 KiB read and write buffers, TLS records, HPACK tables)
	// and three goroutines; a call's headers at maxHeaderListSize and its
	// request at maxRecvMsgSize, arriving (gRPC's buffer) or decoded, and
	// its goroutine. TestWorstCaseFitsTheBudget holds the port at its
	// default limits that way: 64 connections and 256 calls took 26.7 MiB
	// of heap (client ends included) of the 40 MiB these count.
	perConnectionBytes = 128 << 10
	perStreamBytes     = 128 << 10
)

// DefaultLimits are the limits of the adapter's KEDA port.
func DefaultLimits() Limits {
	return Limits{
		MaxConnections:        DefaultMaxConnections,
		MaxStreams:            DefaultMaxStreams,
		HandshakeTimeout:      10 * time.Second,
		MaxConnectionIdle:     5 * time.Minute,
		MaxConnectionAge:      30 * time.Minute,
		MaxConnectionAgeGrace: time.Minute,
	}
}

// WorstCaseBytes is the most heap the port holds for its clients:
// MaxConnections connections and MaxStreams calls at their largest.
func (l Limits) WorstCaseBytes() int64 {
	return int64(l.MaxConnections)*perConnectionBytes + int64(l.MaxStreams)*perStreamBytes
}

// Validate reports every limit that is not positive.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxConnections < 1 || l.MaxConnections > MaxLimit {
		errs = append(errs, fmt.Errorf("the most connections must be between 1 and %d, got %d", MaxLimit, l.MaxConnections))
	}
	if l.MaxStreams < 1 || l.MaxStreams > MaxLimit {
		errs = append(errs, fmt.Errorf("the most calls and streams must be between 1 and %d, got %d", MaxLimit, l.MaxStreams))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"handshake timeout", l.HandshakeTimeout},
		{"idle connection limit", l.MaxConnectionIdle},
		{"connection age", l.MaxConnectionAge},
		{"connection age grace", l.MaxConnectionAgeGrace},
	} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("the %s must be positive, got %s", d.name, d.d))
		}
	}
	return errors.Join(errs...)
}

// Option changes how Listen builds the server.
type Option func(*Limits)

// WithLimits serves with l instead of DefaultLimits.
func WithLimits(l Limits) Option {
	return func(dst *Limits) { *dst = l }
}

// serverOptions are the gRPC server's bounds for l; calls counts the calls
// and streams in flight.
func (l Limits) serverOptions(calls *callLimiter) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxHeaderListSize(maxHeaderListSize),
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
		grpc.MaxConcurrentStreams(uint32(l.MaxStreams)), // per connection; calls caps them all
		grpc.ConnectionTimeout(l.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     l.MaxConnectionIdle,
			MaxConnectionAge:      l.MaxConnectionAge,
			MaxConnectionAgeGrace: l.MaxConnectionAgeGrace,
			Time:                  pingInterval,
			Timeout:               pingTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.InTapHandle(calls.admit),
	}
}

// callLimiter caps the calls and streams in flight over all connections.
// It admits a stream as gRPC's transport creates it, from its headers,
// before its request message is read: a unary call's interceptor runs only
// once the request has arrived, so a client that never finishes sending
// one would otherwise hold its buffers outside any cap.
type callLimiter struct {
	slots   chan struct{}
	refused prometheus.Counter
}

func newCallLimiter(n int, refused prometheus.Counter) *callLimiter {
	return &callLimiter{slots: make(chan struct{}, n), refused: refused}
}

// admit takes a slot for the stream of ctx, given back when the stream
// ends (gRPC cancels its context then), or refuses it with
// ResourceExhausted. It runs in the connection's reader: it never waits.
func (c *callLimiter) admit(ctx context.Context, info *tap.Info) (context.Context, error) {
	select {
	case c.slots <- struct{}{}:
	default:
		c.refused.Inc()
		klog.V(4).InfoS("KEDA scaler call refused: too many in flight", "method", info.FullMethodName, "limit", cap(c.slots))
		return ctx, status.Errorf(codes.ResourceExhausted, "the KEDA scaler has %d calls and streams in flight, its limit; try again", cap(c.slots))
	}
	context.AfterFunc(ctx, func() { <-c.slots })
	return ctx, nil
}

// connLimiter is a listener that keeps at most max accepted connections
// open at once. A connection accepted past it is reset at once, so that a
// client holding many connections is refused instead of queued in the
// kernel's backlog ahead of KEDA's.
type connLimiter struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused prometheus.Counter
}

func newConnLimiter(l net.Listener, n int, refused prometheus.Counter) *connLimiter {
	return &connLimiter{Listener: l, max: int64(n), refused: refused}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refused.Inc()
		klog.V(4).InfoS("KEDA scaler connection refused: too many open", "remote", c.RemoteAddr().String(), "limit", l.max)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset: nothing left in TIME_WAIT
		}
		_ = c.Close()
	}
}

// limitedConn gives its slot back when it is first closed.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
