// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 8 << 20

// bodyReadTimeout bounds, in wall-clock time, how long reading one request
// body may take: the HTTP servers bound only the headers' read time.
const bodyReadTimeout = 30 * time.Second

// Server is one simulated model server: an engine per served model, one
// metrics registry and the HTTP API.
type Server struct {
	cfg     Config
	models  []*served // in the order of cfg.Model; the first answers requests without a model
	byName  map[string]route
	loras   []string // cfg.AdapterNames()
	reg     *prometheus.Registry
	created int64 // unix seconds, for response bodies
	ids     atomic.Uint64
	mux     *http.ServeMux
	clock   Clock
	// bodyTimeout bounds the wall-clock time of reading a request body.
	bodyTimeout time.Duration
}

// served is one model of the server with its own engine.
type served struct {
	name   string
	engine *Engine
}

// route is where a request's model goes: a served model's engine, on its
// base weights (adapter 0) or a LoRA adapter (adapter i+1 is
// cfg.AdapterNames()[i]).
type route struct {
	*served
	adapter int
}

// routeName is the model name of r: its adapter's or its model's.
func (s *Server) routeName(r route) string {
	if r.adapter > 0 {
		return s.loras[r.adapter-1]
	}
	return r.name
}

// NewServer builds a server for a validated cfg on clock, with its own
// metrics registry. Each model named in cfg.Model gets its own engine and
// its own series, labelled with its model_name (and, in vllm-v1 with
// several models, engine "0", "1", ... in order). A LoRA adapter of
// cfg.LoRAAdapters is served by the (single) model's engine.
func NewServer(cfg Config, clock Clock) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	reg := prometheus.NewRegistry()
	now := time.Now()
	s := &Server{cfg: cfg, byName: map[string]route{}, reg: reg, created: now.Unix(), mux: http.NewServeMux(), clock: clock, bodyTimeout: bodyReadTimeout}
	names := cfg.ModelNames()
	for i, name := range names {
		mcfg := cfg
		mcfg.Model = name
		if len(names) > 1 {
			mcfg.Engine = strconv.Itoa(i)
		}
		m, err := NewMetrics(mcfg, reg, now)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", name, err)
		}
		sv := &served{name: name, engine: NewEngine(mcfg, clock, m)}
		s.models = append(s.models, sv)
		s.byName[name] = route{served: sv}
	}
	s.loras = cfg.AdapterNames()
	for i, name := range s.loras {
		s.byName[name] = route{served: s.models[0], adapter: i + 1}
	}
	s.mux.Handle("GET /v1/models", s.whenLoaded(http.HandlerFunc(s.listModels)))
	s.mux.Handle("POST /v1/completions", s.whenLoaded(http.HandlerFunc(s.completions)))
	s.mux.Handle("POST /v1/chat/completions", s.whenLoaded(http.HandlerFunc(s.chatCompletions)))
	s.mux.Handle("GET /health", s.whenLoaded(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })))
	s.mux.Handle("GET /metrics", s.whenLoaded(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	s.mux.HandleFunc("GET /sim/busy", s.busy)
	return s, nil
}

// Loaded reports whether the model has loaded: LoadTime of simulated time
// has passed since the clock started.
func (s *Server) Loaded() bool { return s.clock.Now() >= s.cfg.LoadTime }

// whenLoaded answers 503 until the model has loaded, as a real server
// serves nothing (vLLM does not even listen) while it loads its weights.
func (s *Server) whenLoaded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.Loaded() {
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("loading the model (%s of simulated time)", s.cfg.LoadTime))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// BusyReading is the body of GET /sim/busy: the simulated GPU's busy time
// since the server started, for a fake NVML backend that reads utilization
// the way NVML measures it. Not part of any real server's API.
type BusyReading struct {
	// NowSeconds is the simulated time of the reading since the start.
	NowSeconds float64 `json:"now_seconds"`
	// BusySeconds is the simulated time spent in engine steps (all models'
	// engines together).
	BusySeconds float64 `json:"busy_seconds"`
	// SMBusySeconds is BusySeconds weighted by each step's fullness.
	SMBusySeconds float64 `json:"sm_busy_seconds"`
	// Loaded says whether the model has loaded.
	Loaded bool `json:"loaded"`
}

// Busy reads the busy time of every engine together.
func (s *Server) Busy() BusyReading {
	out := BusyReading{Loaded: s.Loaded()}
	for _, m := range s.models {
		b := m.engine.Busy()
		out.NowSeconds = max(out.NowSeconds, b.Now.Seconds())
		out.BusySeconds += b.Busy.Seconds()
		out.SMBusySeconds += b.SMBusy.Seconds()
	}
	return out
}

func (s *Server) busy(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Busy()) }

// Handler is the server's HTTP API.
func (s *Server) Handler() http.Handler { return s.mux }

// Engine is the scheduler of the server's first model; Run it before
// serving requests (Serve runs every model's engine).
func (s *Server) Engine() *Engine { return s.models[0].engine }

// Serve runs the engine and serves HTTP on ln until ctx is done, then shuts
// down gracefully: it stops accepting, lets in-flight requests finish for
// up to drain, then stops the engine.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	engineCtx, stopEngines := context.WithCancel(context.Background())
	var engines sync.WaitGroup
	for _, m := range s.models {
		engines.Go(func() { _ = m.engine.Run(engineCtx) }) // Run returns nil on cancellation
	}

	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	serveDone := make(chan error, 1)
	go func() { serveDone <- hs.Serve(ln) }()

	var err error
	select {
	case <-ctx.Done():
		klog.InfoS("Shutting down", "address", ln.Addr().String(), "drain", drain)
		sctx, cancel := context.WithTimeout(context.Background(), drain)
		if serr := hs.Shutdown(sctx); serr != nil {
			klog.InfoS("Drain timed out, closing open connections", "err", serr)
			_ = hs.Close()
		}
		cancel()
		if serr := <-serveDone; !errors.Is(serr, http.ErrServerClosed) {
			err = fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), serr)
		}
	case err = <-serveDone:
		err = fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), err)
	}
	stopEngines()
	engines.Wait()
	return err
}

// apiError is the body vLLM's OpenAI server returns for an error.
type apiError struct {
	Error apiErrorInfo `json:"error"`
}

type apiErrorInfo struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	typ := "BadRequestError"
	switch code {
	case http.StatusNotFound:
		typ = "NotFoundError"
	case http.StatusServiceUnavailable:
		typ = "ServiceUnavailableError"
	case http.StatusInternalServerError:
		typ = "InternalServerError"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(apiError{Error: apiErrorInfo{Message: msg, Type: typ, Code: code}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	data := make([]map[string]any, 0, len(s.models))
	for _, m := range s.models {
		data = append(data, map[string]any{
			"id": m.name, "object": "model", "created": s.created, "owned_by": "vllm",
			"root": m.name, "parent": nil, "max_model_len": s.cfg.MaxModelLen,
		})
	}
	// vLLM lists each LoRA adapter with its base model as parent (and
	// its path as root: here its name).
	for _, a := range s.loras {
		data = append(data, map[string]any{
			"id": a, "object": "model", "created": s.created, "owned_by": "vllm",
			"root": a, "parent": s.models[0].name, "max_model_len": nil,
		})
	}
	writeJSON(w, map[string]any{"object": "list", "data": data})
}

// commonRequest holds the fields both endpoints share.
type commonRequest struct {
	Model               string `json:"model"`
	MaxTokens           *int   `json:"max_tokens"`
	MaxCompletionTokens *int   `json:"max_completion_tokens"`
	N                   *int   `json:"n"`
	Stream              bool   `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type completionRequest struct {
	commonRequest
	Prompt json.RawMessage `json:"prompt"`
}

type chatRequest struct {
	commonRequest
	Messages []chatMessage `json:"messages"`
}

// readBody reads r's body, at most limit bytes, within timeout (wall
// clock). The deadline is lifted once the body is read, as an answer
// streamed for longer must still notice a client that goes away; it stays
// after a failure, so that the server does not wait for the rest of the
// body before it answers and closes the connection.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(timeout)) // unsupported only by test recorders
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return nil, err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, nil
}

// decode reads a JSON body into v, answering 400 on failure.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := readBody(w, r, maxBodyBytes, s.bodyTimeout)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reading request body: %v", err))
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid JSON body: %v", err))
		return false
	}
	return true
}

// validate checks the shared fields and returns where the request goes
// (the first model when the request names none) and the output length.
func (s *Server) validate(w http.ResponseWriter, c *commonRequest, prompt int) (route, int, bool) {
	m := route{served: s.models[0]}
	if c.Model != "" {
		var ok bool
		if m, ok = s.byName[c.Model]; !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", c.Model))
			return route{}, 0, false
		}
	}
	if c.N != nil && *c.N != 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("n must be 1 in inference-sim, got %d.", *c.N))
		return route{}, 0, false
	}
	maxTokens := s.cfg.DefaultMaxTokens
	if c.MaxCompletionTokens != nil {
		maxTokens = *c.MaxCompletionTokens
	}
	if c.MaxTokens != nil {
		maxTokens = *c.MaxTokens
	}
	if maxTokens < 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("max_tokens must be at least 1, got %d.", maxTokens))
		return route{}, 0, false
	}
	if prompt+maxTokens > s.cfg.MaxModelLen {
		writeError(w, http.StatusBadRequest, fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.cfg.MaxModelLen, prompt+maxTokens, prompt, maxTokens))
		return route{}, 0, false
	}
	return m, maxTokens, true
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if !s.decode(w, r, &req) {
		return
	}
	prompt, err := promptTokens(req.Prompt)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	m, maxTokens, ok := s.validate(w, &req.commonRequest, prompt)
	if !ok {
		return
	}
	s.generate(w, r, m, &req.commonRequest, prompt, maxTokens, false)
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !s.decode(w, r, &req) {
		return
	}
	prompt, err := chatTokens(req.Messages)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	m, maxTokens, ok := s.validate(w, &req.commonRequest, prompt)
	if !ok {
		return
	}
	s.generate(w, r, m, &req.commonRequest, prompt, maxTokens, true)
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// generate submits the request to m's engine and writes the answer, as
// server-sent events (one per generated token) or as one JSON body. The
// answer names the model the request named (an adapter's name for an
// adapter), as vLLM's does.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, m route, c *commonRequest, prompt, maxTokens int, chat bool) {
	ctx := r.Context()
	st, err := m.engine.SubmitAdapter(ctx, m.adapter, prompt, maxTokens)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("engine unavailable: %v", err))
		return
	}
	defer st.Cancel()
	id := s.ids.Add(1)
	if c.Stream {
		includeUsage := c.StreamOptions != nil && c.StreamOptions.IncludeUsage
		s.stream(ctx, w, st, s.routeName(m), id, prompt, chat, includeUsage)
		return
	}
	gen, reason, err := waitDone(ctx, st)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("request not completed: %v", err))
		return
	}
	text := make([]byte, 0, gen*6)
	for i := range gen {
		text = append(text, tokenText(s.cfg.Seed, i)...)
	}
	u := usage{PromptTokens: prompt, CompletionTokens: gen, TotalTokens: prompt + gen}
	if chat {
		writeJSON(w, map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", id), "object": "chat.completion", "created": time.Now().Unix(), "model": s.routeName(m),
			"choices": []map[string]any{{
				"index": 0, "message": map[string]any{"role": "assistant", "content": string(text)},
				"logprobs": nil, "finish_reason": reason, "stop_reason": nil,
			}},
			"usage": u,
		})
		return
	}
	writeJSON(w, map[string]any{
		"id": fmt.Sprintf("cmpl-%d", id), "object": "text_completion", "created": time.Now().Unix(), "model": s.routeName(m),
		"choices": []map[string]any{{"index": 0, "text": string(text), "logprobs": nil, "finish_reason": reason, "stop_reason": nil}},
		"usage":   u,
	})
}

func waitDone(ctx context.Context, st *Stream) (int, string, error) {
	seen := 0
	for {
		gen, done, reason, err := st.Wait(ctx, seen)
		if err != nil {
			return 0, "", err
		}
		if done {
			return gen, reason, nil
		}
		seen = gen
	}
}

// stream writes one server-sent event per generated token, then a usage
// event if asked, then [DONE]. Events are built by appending to one buffer
// from precomputed JSON fragments.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, st *Stream, modelName string, id uint64, prompt int, chat, includeUsage bool) {
	flusher, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	model, _ := json.Marshal(modelName)
	created := strconv.FormatInt(time.Now().Unix(), 10)
	var head, tokenPre, tokenPost string
	if chat {
		head = `data: {"id":"chatcmpl-` + strconv.FormatUint(id, 10) + `","object":"chat.completion.chunk","created":` + created + `,"model":` + string(model) + `,"choices":[`
		tokenPre = `{"index":0,"delta":{"content":"`
		tokenPost = `"},"logprobs":null,"finish_reason":`
	} else {
		head = `data: {"id":"cmpl-` + strconv.FormatUint(id, 10) + `","object":"text_completion","created":` + created + `,"model":` + string(model) + `,"choices":[`
		tokenPre = `{"index":0,"text":"`
		tokenPost = `","logprobs":null,"finish_reason":`
	}
	buf := make([]byte, 0, 1024)
	if chat {
		buf = append(buf, head...)
		buf = append(buf, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	sent := 0
	for {
		gen, done, reason, err := st.Wait(ctx, sent)
		if err != nil {
			return // client gone or engine stopped; Cancel aborts the request
		}
		for ; sent < gen; sent++ {
			buf = append(buf, head...)
			buf = append(buf, tokenPre...)
			buf = append(buf, tokenText(s.cfg.Seed, sent)...)
			buf = append(buf, tokenPost...)
			if done && sent == gen-1 {
				buf = append(buf, '"')
				buf = append(buf, reason...)
				buf = append(buf, '"')
			} else {
				buf = append(buf, "null"...)
			}
			buf = append(buf, "}]}\n\n"...)
		}
		if done {
			if includeUsage {
				u, _ := json.Marshal(usage{PromptTokens: prompt, CompletionTokens: gen, TotalTokens: prompt + gen})
				buf = append(buf, head...)
				buf = append(buf, `],"usage":`...)
				buf = append(buf, u...)
				buf = append(buf, "}\n\n"...)
			}
			buf = append(buf, "data: [DONE]\n\n"...)
		}
		if _, err := w.Write(buf); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		buf = buf[:0]
		if done {
			return
		}
	}
}
