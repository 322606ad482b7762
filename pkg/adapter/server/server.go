// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package server wires the adapter together: informers, the target tracker,
// the scraper, the store and the custom metrics provider, on top of the
// aggregated API server of custom-metrics-apiserver, with health checks that
// reflect the pipeline.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/answercache"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/kedascaler"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// Config is the adapter's complete configuration.
type Config struct {
	Adapter            *basecmd.AdapterBase
	Scrape             scrape.Config
	MaxAge             time.Duration
	SLOWindow          time.Duration // of the latency percentiles; 0 means store.DefaultSLOWindow
	Namespaces         []string
	DemandTTL          time.Duration
	FirstScrapeTimeout time.Duration
	// ServerScrape holds the scheme and auth of --server-config's servers,
	// by name (targets.Config.ServerScrape).
	ServerScrape map[string]targets.ScrapeSettings
	// MaxSelectorsPerNamespace and MaxSelectors bound demand (selectors and
	// pods asked about) per namespace and in total.
	MaxSelectorsPerNamespace int
	MaxSelectors             int
	GPUAgentSelector         labels.Selector
	// GPUAgentNamespace is the namespace whose DaemonSet pods matching
	// GPUAgentSelector are trusted as gpu-agents.
	GPUAgentNamespace string
	EnableExternal    bool
	// AnswerCacheTTL is how long an encoded answer is served to identical
	// questions (see package answercache); 0 disables the cache.
	AnswerCacheTTL time.Duration
	// ShutdownDelay is how long the API server keeps serving after SIGTERM
	// with /readyz failing, before it closes its port.
	ShutdownDelay time.Duration
	// KEDAScaler, when its Address is set, serves KEDA's external scaler
	// API on a port of its own (package kedascaler).
	KEDAScaler KEDAScalerConfig
	// RoleLabel is the pod label a role=VALUE metric selector reads
	// (provider.Config.RoleLabel); empty is provider.DefaultRoleLabel.
	RoleLabel string
	// Forecast sets inference_demand_forecast_per_replica; zero is
	// provider.DefaultForecastConfig().
	Forecast provider.ForecastConfig
	// LeaderWorkerSets watches LeaderWorkerSets, once their CRD is
	// served, to serve their object metrics (lws.go).
	LeaderWorkerSets bool
	// LeaderWorkerSetsRecheck is how often the adapter looks for their CRD
	// (and RBAC) while it watches none; 0 is
	// DefaultLeaderWorkerSetsRecheck.
	LeaderWorkerSetsRecheck time.Duration
}

// KEDAScalerConfig says where and how the KEDA external scaler is served.
type KEDAScalerConfig struct {
	// Address is host:port; empty means off.
	Address string
	// ClientCAFile, when set, makes client certificates signed by it required.
	ClientCAFile string
	// Plaintext serves without TLS; otherwise the API server's serving
	// certificate is used.
	Plaintext bool
	// MaxConnections and MaxStreams bound the connections open and the
	// calls and streams in flight (kedascaler.Limits); 0 means the
	// default.
	MaxConnections int
	MaxStreams     int
	// Grants allow client certificates' users and groups namespaces.
	Grants []kedascaler.Grant
	// SubjectAccessReview also allows a caller what the API server's
	// authorizer lets it get of custom.metrics.k8s.io.
	SubjectAccessReview bool
	// AllowUnauthenticated lets callers without a client certificate ask
	// about any namespace.
	AllowUnauthenticated bool
}

// Run builds the adapter from cfg and serves until ctx is done.
func Run(ctx context.Context, cfg *Config) error {
	a, err := build(cfg, clock.RealClock{})
	if err != nil {
		return err
	}
	return a.run(ctx)
}

// adapter is every piece of a built adapter: what run starts and stops.
type adapter struct {
	cfg     *Config
	watched *watched
	scraper *scrape.Manager
	tracker *targets.Tracker
	reach   *apiReachability
	api     *genericapiserver.GenericAPIServer
	keda    *kedascaler.Server // nil when off
	lws     *lwsWatch          // nil unless LeaderWorkerSets are looked for after start
}

// build makes the adapter's pieces from cfg and wires them together,
// starting nothing: the informers, the store and the scraper, the target
// tracker, the provider, the API server with the answer cache and the
// health checks, and the KEDA scaler's port when asked for.
func build(cfg *Config, clk clock.WithTicker) (*adapter, error) {
	restConfig, err := cfg.Adapter.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("building client configuration: %w", err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	w, err := newWatched(func(ns string) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	}, cfg.Namespaces)
	if err != nil {
		return nil, fmt.Errorf("setting up informers: %w", err)
	}
	var lwss provider.LeaderWorkerSetLister
	var lateLWS *lwsWatch
	if cfg.LeaderWorkerSets {
		mc, err := metadata.NewForConfig(restConfig)
		if err != nil {
			return nil, fmt.Errorf("building metadata client: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		lwss, lateLWS, err = w.watchLeaderWorkerSets(ctx, client.Discovery(), selfAccess(client), mc, cfg.Namespaces, cfg.LeaderWorkerSetsRecheck)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("setting up LeaderWorkerSet informers: %w", err)
		}
	}

	reg := kubeRegisterer{}
	st := store.New()
	st.SetSLOWindow(cfg.SLOWindow)
	reg.MustRegister(store.NewCollector(st, cfg.MaxAge, clk.Now))
	// A pod's latency histograms are parsed only while a question about a
	// latency percentile covered it within --demand-ttl: per pod, so that a
	// question in one namespace turns nothing on in another.
	latency := provider.NewLatencyDemand(cfg.DemandTTL, clk)
	scrapeCfg := cfg.Scrape
	scrapeCfg.Histograms = latency.WantedFor
	scraper, err := scrape.NewManager(scrapeCfg, st, reg)
	if err != nil {
		return nil, fmt.Errorf("setting up the scraper: %w", err)
	}
	trackerCfg := targets.Config{
		DemandTTL:                cfg.DemandTTL,
		FirstScrapeTimeout:       cfg.FirstScrapeTimeout,
		MaxSelectorsPerNamespace: cfg.MaxSelectorsPerNamespace,
		MaxSelectors:             cfg.MaxSelectors,
		Resync:                   time.Second,
		AgentSelector:            cfg.GPUAgentSelector,
		AgentNamespace:           cfg.GPUAgentNamespace,
		Servers:                  cfg.Scrape.Servers,
		ServerScrape:             cfg.ServerScrape,
	}
	// Agents' pages reach the store only through the gate: an agent speaks
	// for the pods of its own node, and only while it is a trusted agent.
	scraper.SetAgentSink(targets.NewAgentGate(trackerCfg.AgentTrust(), w.pods, st, reg))
	tracker := targets.New(trackerCfg, w.pods, scraper, st, clk)
	for _, inf := range w.podInformers {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(interface{}) { tracker.Poke() },
			UpdateFunc: func(interface{}, interface{}) { tracker.Poke() },
			DeleteFunc: func(interface{}) { tracker.Poke() },
		}); err != nil {
			return nil, fmt.Errorf("watching pods: %w", err)
		}
	}

	p := provider.New(provider.Config{MaxAge: cfg.MaxAge, Window: cfg.Scrape.Interval, SLOWindow: cfg.SLOWindow, RoleLabel: cfg.RoleLabel, Latency: latency, Forecast: cfg.Forecast, Registerer: reg},
		provider.Listers{Pods: w.pods, Deployments: w.deployments, StatefulSets: w.statefulsets, LeaderWorkerSets: lwss},
		st, tracker, clk)
	cfg.Adapter.WithCustomMetrics(p)
	if cfg.EnableExternal {
		cfg.Adapter.WithExternalMetrics(p.External())
	}

	apiConfig, err := cfg.Adapter.Config()
	if err != nil {
		return nil, fmt.Errorf("building the API server configuration: %w", err)
	}
	// Through the delay after SIGTERM /readyz fails while requests are still
	// served, so that kube-apiserver stops sending before the port closes.
	apiConfig.GenericConfig.ShutdownDelayDuration = cfg.ShutdownDelay
	// The answer cache sits inside the filters, after authentication and
	// authorization: only an authorized request reaches it.
	cacheCfg := answercache.Config{TTL: cfg.AnswerCacheTTL, MaxAge: cfg.MaxAge}
	apiConfig.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(answercache.Wrap(cacheCfg, h, reg, clk), c)
	}
	srv, err := cfg.Adapter.Server()
	if err != nil {
		return nil, fmt.Errorf("building the API server: %w", err)
	}
	reach := newAPIReachability(versionProbe(client.Discovery().RESTClient()), clk)
	checks := []healthz.HealthChecker{informersSynced(w.synced), healthz.NamedCheck("kube-apiserver-reachable", reach.Check)}
	if rh := apiConfig.GenericConfig.Authentication.RequestHeaderConfig; rh != nil && rh.CAContentProvider != nil {
		checks = append(checks, frontProxyCALoaded(rh.CAContentProvider))
	}
	if err := srv.GenericAPIServer.AddReadyzChecks(checks...); err != nil {
		return nil, fmt.Errorf("adding readyz check: %w", err)
	}
	if err := srv.GenericAPIServer.AddLivezChecks(0, scrapeLoopAlive(scraper, cfg.Scrape.Interval, clk)); err != nil {
		return nil, fmt.Errorf("adding livez check: %w", err)
	}
	keda, err := kedaScaler(cfg, apiConfig.GenericConfig.SecureServing, apiConfig.GenericConfig.Authorization.Authorizer, p, reg)
	if err != nil {
		return nil, err
	}
	return &adapter{cfg: cfg, watched: w, scraper: scraper, tracker: tracker, reach: reach, api: srv.GenericAPIServer, keda: keda, lws: lateLWS}, nil
}

// run starts the pipeline (informers, scraper, reachability probe, and the
// tracker once the caches have synced), serves the API until ctx is done,
// and stops the pipeline only after the API server has closed its port.
func (a *adapter) run(ctx context.Context) error {
	// The pipeline outlives ctx by the shutdown delay, so that the API
	// server answers from fresh values until its port closes.
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	for _, f := range a.watched.factories {
		f.Start(pctx.Done())
	}
	for _, f := range a.watched.metaFactories {
		f.Start(pctx.Done())
	}
	var pipeline sync.WaitGroup
	pipeline.Go(func() { _ = a.scraper.Run(pctx) })
	pipeline.Go(func() { a.reach.Run(pctx) })
	pipeline.Go(func() {
		if !cache.WaitForCacheSync(pctx.Done(), a.watched.synced...) {
			return
		}
		klog.InfoS("Informer caches synced; tracking targets")
		a.tracker.Run(pctx)
	})
	if a.lws != nil {
		pipeline.Go(func() { a.lws.run(pctx) })
	}
	if a.keda != nil {
		pipeline.Go(func() {
			if err := a.keda.Serve(pctx); err != nil {
				klog.ErrorS(err, "KEDA external scaler stopped")
			}
		})
	}
	klog.InfoS("Serving custom.metrics.k8s.io", "namespaces", a.cfg.Namespaces, "scrapeInterval", a.cfg.Scrape.Interval, "maxAge", a.cfg.MaxAge)
	err := a.api.PrepareRun().RunWithContext(ctx)
	cancel()
	for _, f := range a.watched.factories {
		f.Shutdown()
	}
	for _, f := range a.watched.metaFactories {
		f.Shutdown()
	}
	pipeline.Wait()
	return err
}

// informersSynced is the readyz check that every informer cache has synced:
// until then the adapter knows no pods and would answer nothing.
func informersSynced(synced []cache.InformerSynced) healthz.HealthChecker {
	return healthz.NamedCheck("informers-synced", func(*http.Request) error {
		for _, s := range synced {
			if !s() {
				return fmt.Errorf("informer caches not synced yet")
			}
		}
		return nil
	})
}

// caVerifier is what the front-proxy check reads of the request-header CA:
// the verification options, and whether there are any yet.
type caVerifier interface {
	VerifyOptions() (x509.VerifyOptions, bool)
}

// frontProxyCALoaded is the readyz check that the front proxy's CA
// (requestheader-client-ca-file of kube-system/extension-apiserver-authentication)
// is loaded. The API server library reads it through an informer that syncs
// after the port opens; until then it cannot verify kube-apiserver's proxy
// certificate, so every question through the aggregator is taken as
// system:anonymous's and refused (403). A replica reported ready in that
// window would fail the HPA's questions during a rolling update.
func frontProxyCALoaded(ca caVerifier) healthz.HealthChecker {
	return healthz.NamedCheck("front-proxy-ca-loaded", func(*http.Request) error {
		if _, ok := ca.VerifyOptions(); !ok {
			return fmt.Errorf("the front proxy's CA (requestheader-client-ca-file in kube-system/extension-apiserver-authentication) is not loaded yet")
		}
		return nil
	})
}

// scrapeActivity is what the liveness check reads of the scraper.
type scrapeActivity interface {
	Targets() int
	LastScrape() time.Time
}

// scrapeLoopAlive is the livez check that the scrape loop runs: with
// targets, a scrape must have started within three intervals. The three
// intervals count from the time the check first saw targets after seeing
// none, if later than the last scrape: a loop's first scrape waits a random
// delay of up to an interval, so targets that appear at start, or after a
// time without any, must not fail the check for a scrape that was never
// due (at a 30s interval, kubelet's three failed probes would restart the
// adapter).
func scrapeLoopAlive(s scrapeActivity, interval time.Duration, clk clock.PassiveClock) healthz.HealthChecker {
	var (
		mu    sync.Mutex
		since time.Time // when the check first saw targets after none; zero while none
	)
	return healthz.NamedCheck("scrape-loop", func(*http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		if s.Targets() == 0 {
			since = time.Time{}
			return nil
		}
		if since.IsZero() {
			since = clk.Now()
		}
		last := s.LastScrape()
		if limit := 3 * interval; clk.Since(last) > limit && clk.Since(since) > limit {
			return fmt.Errorf("no scrape started in %s (last at %s) although there are targets", limit, last.Format(time.RFC3339))
		}
		return nil
	})
}

// kedaScaler opens the KEDA external scaler's port when cfg asks for it,
// with the API server's serving certificate unless plaintext is asked for,
// and its authorization rule: cfg's grants, and authz (the API server's
// delegated authorizer, whose verdicts it caches) when asked for; nil when
// it is off.
func kedaScaler(cfg *Config, serving *genericapiserver.SecureServingInfo, authz kedascaler.Reviewer, p *provider.Provider, reg prometheus.Registerer) (*kedascaler.Server, error) {
	kc := cfg.KEDAScaler
	if kc.Address == "" {
		return nil, nil
	}
	var tlsConfig *tls.Config
	if !kc.Plaintext {
		if serving == nil || serving.Cert == nil {
			return nil, fmt.Errorf("the KEDA scaler serves with the API server's certificate, and there is none")
		}
		var err error
		if tlsConfig, err = kedascaler.ServerTLS(serving.Cert, kc.ClientCAFile); err != nil {
			return nil, fmt.Errorf("KEDA scaler TLS: %w", err)
		}
	}
	access := kedascaler.Access{Grants: kc.Grants, AllowUnauthenticated: kc.AllowUnauthenticated}
	if kc.SubjectAccessReview {
		if authz == nil {
			return nil, fmt.Errorf("the KEDA scaler's SubjectAccessReviews go through the API server's authorizer, and there is none")
		}
		access.Reviewer = authz
	}
	if kc.AllowUnauthenticated {
		klog.Warning("The KEDA scaler's port answers callers without a client certificate about any namespace (--keda-scaler-allow-unauthenticated): make sure only KEDA can reach it")
	}
	scaler := kedascaler.New(kedascaler.Config{StreamInterval: cfg.Scrape.Interval, Access: access}, p, p.External())
	limits := kedascaler.DefaultLimits()
	if kc.MaxConnections > 0 {
		limits.MaxConnections = kc.MaxConnections
	}
	if kc.MaxStreams > 0 {
		limits.MaxStreams = kc.MaxStreams
	}
	return kedascaler.Listen(kc.Address, tlsConfig, scaler, reg, kedascaler.WithLimits(limits))
}

// kubeRegisterer registers client_golang collectors into the API server's
// metrics registry, so that they are served on its /metrics.
type kubeRegisterer struct{}

var _ prometheus.Registerer = kubeRegisterer{}

func (kubeRegisterer) Register(c prometheus.Collector) error {
	legacyregistry.RawMustRegister(c)
	return nil
}

func (kubeRegisterer) MustRegister(cs ...prometheus.Collector) { legacyregistry.RawMustRegister(cs...) }

func (kubeRegisterer) Unregister(prometheus.Collector) bool { return false }
