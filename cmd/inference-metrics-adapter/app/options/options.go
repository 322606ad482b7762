// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package options holds the adapter's command-line options: their defaults
// (some following other flags: see Complete), their flags in the sections
// --help prints, their validation, and their translation into a
// server.Config.
package options

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/dialect"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/forecast"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/kedascaler"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/server"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// Options are the adapter's settings, as set by flags.
type Options struct {
	// Adapter carries the aggregated API server flags of
	// custom-metrics-apiserver: secure serving, delegated authn/authz, audit.
	Adapter *basecmd.AdapterBase

	// Logging is klog's configuration: --logging-format, -v, --vmodule.
	Logging *logsapi.LoggingConfiguration

	Kubeconfig         string
	ScrapeInterval     time.Duration
	ScrapeTimeout      time.Duration
	MaxAge             time.Duration
	SLOWindow          time.Duration
	MaxBodySize        int64
	ScrapeConcurrency  int
	Namespaces         []string
	DemandTTL          time.Duration
	FirstScrapeTimeout time.Duration
	GPUAgentSelector   string
	GPUAgentNamespace  string
	EnableExternal     bool
	ScrapeGzip         bool
	ServerConfig       string
	// ShutdownDelay keeps serving, with /readyz failing, after SIGTERM.
	ShutdownDelay time.Duration
	// AnswerCacheTTL is how long an encoded answer serves identical
	// questions; 0 disables the answer cache.
	AnswerCacheTTL time.Duration
	// RoleLabel is the pod label a role=VALUE metric selector reads.
	RoleLabel string
	// LeaderWorkerSets watches LeaderWorkerSets (when their CRD is
	// installed) to serve their object metrics.
	LeaderWorkerSets bool
	// LeaderWorkerSetsRecheck is how often the adapter looks for their CRD
	// while it watches none.
	LeaderWorkerSetsRecheck time.Duration

	// KEDAScalerAddress serves KEDA's external scaler API there; empty is
	// off. KEDAScalerClientCAFile requires client certificates it signed;
	// KEDAScalerPlaintext serves without TLS.
	KEDAScalerAddress      string
	KEDAScalerClientCAFile string
	KEDAScalerPlaintext    bool
	// KEDAScalerGrants (user:NAME=NS,... or group:NAME=NS,...) and
	// KEDAScalerSubjectAccessReview say which namespaces a client
	// certificate's subject may ask about; KEDAScalerAllowUnauthenticated
	// lets callers without one ask about any.
	KEDAScalerGrants               []string
	KEDAScalerSubjectAccessReview  bool
	KEDAScalerAllowUnauthenticated bool

	// KEDAScalerMaxConnections and KEDAScalerMaxStreams bound the KEDA
	// port: connections open, and calls and streams in flight over all of
	// them.
	KEDAScalerMaxConnections int
	KEDAScalerMaxStreams     int

	// FirstScrapeConcurrency is the size of the on-demand scrape pool.
	FirstScrapeConcurrency int
	// NamespaceScrapeConcurrency caps the background scrapes one namespace
	// holds at once; 0 means half of ScrapeConcurrency.
	NamespaceScrapeConcurrency int

	// MaxSelectorsPerNamespace and MaxSelectors bound demand: the selectors
	// (and pods by name) asked about, per namespace and in total.
	MaxSelectorsPerNamespace int
	MaxSelectors             int

	// ScrapeTLS holds the flags of HTTPS scraping and its credentials
	// (scrapetls.go).
	ScrapeTLS ScrapeTLSOptions

	// ForecastMethod, ForecastWindow, ForecastHorizon ("auto" or a
	// duration), ForecastZ, ForecastHoltAlpha, ForecastHoltBeta and
	// ForecastMaxWorkloads set inference_demand_forecast_per_replica;
	// ForecastFloor and ForecastFloorWindow its floor; ForecastRateFloor
	// its rate floor; ForecastAutoBursty the auto method's threshold.
	ForecastMethod       string
	ForecastWindow       time.Duration
	ForecastHorizon      string
	ForecastZ            float64
	ForecastHoltAlpha    float64
	ForecastHoltBeta     float64
	ForecastFloor        float64
	ForecastFloorWindow  time.Duration
	ForecastRateFloor    time.Duration
	ForecastAutoBursty   float64
	ForecastMaxWorkloads int

	// namespaceFile holds the adapter's own namespace in a pod; read when
	// POD_NAMESPACE is not set and --gpu-agent-namespace is empty.
	namespaceFile string

	// servers is the --server-config file as loaded by Validate.
	servers *parse.Servers
	// serverScrape is the --server-config file's scheme and auth, by server.
	serverScrape map[string]targets.ScrapeSettings
}

// NewOptions returns options holding the defaults; the scrape flags start
// from the scraper's own defaults (scrape.DefaultConfig).
func NewOptions() *Options {
	// (32 + 4) × 4 MiB = 144 MiB of page buffers at worst: under 30% of the
	// chart's 512Mi memory limit.
	sc := scrape.DefaultConfig()
	return &Options{
		Adapter:            &basecmd.AdapterBase{Name: "inference-metrics-adapter"},
		Logging:            logsapi.NewLoggingConfiguration(),
		ScrapeInterval:     sc.Interval,
		ScrapeTimeout:      sc.Timeout,
		MaxAge:             defaultMaxAge,
		SLOWindow:          store.DefaultSLOWindow,
		MaxBodySize:        sc.MaxBodySize,
		ScrapeConcurrency:  sc.Concurrency,
		DemandTTL:          10 * time.Minute,
		FirstScrapeTimeout: 2 * time.Second,
		GPUAgentSelector:   "app.kubernetes.io/name=inference-metrics-adapter-gpu-agent",

		FirstScrapeConcurrency: sc.FirstConcurrency,

		ScrapeTLS: ScrapeTLSOptions{MaxKeptConnections: sc.MaxKeptTLSConnections},

		MaxSelectorsPerNamespace: targets.DefaultMaxSelectorsPerNamespace,
		MaxSelectors:             targets.DefaultMaxSelectors,
		namespaceFile:            serviceAccountNamespaceFile,

		ShutdownDelay:  10 * time.Second,
		AnswerCacheTTL: defaultAnswerCacheTTL,

		LeaderWorkerSetsRecheck: server.DefaultLeaderWorkerSetsRecheck,

		KEDAScalerMaxConnections: kedascaler.DefaultMaxConnections,
		KEDAScalerMaxStreams:     kedascaler.DefaultMaxStreams,

		ForecastMethod:       string(forecast.Auto),
		ForecastWindow:       forecast.DefaultWindow,
		ForecastHorizon:      forecastHorizonAuto,
		ForecastZ:            forecast.DefaultZ,
		ForecastHoltAlpha:    forecast.DefaultAlpha,
		ForecastHoltBeta:     forecast.DefaultBeta,
		ForecastFloorWindow:  forecast.DefaultFloorWindow,
		ForecastAutoBursty:   forecast.DefaultBursty,
		ForecastMaxWorkloads: provider.DefaultMaxForecastWorkloads,
	}
}

// forecastHorizonAuto is --forecast-horizon's value for the pods' own
// start-up time.
const forecastHorizonAuto = "auto"

// Defaults that other flags can raise or lower when they are not set
// themselves; see Complete.
const (
	defaultMaxAge = 15 * time.Second
	// defaultAnswerCacheTTL is lowered to a quarter of a shorter
	// --scrape-interval, so that the cache adds at most a quarter of an
	// interval to the time a new value takes to show.
	defaultAnswerCacheTTL = time.Second
)

// Flags returns every flag bound to o, in the sections --help prints: the
// adapter's own flags, then the API server's (custom-metrics-apiserver's),
// then logging. Call it once per Options.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.addOwnFlags(&fss)

	// InstallFlags fills in the API server options and their defaults, and
	// runs only once per AdapterBase: the adapter's Config would otherwise
	// run it again later. Its flags land in one set; they are regrouped
	// below, bound to the same fields.
	all := pflag.NewFlagSet("apiserver", pflag.ContinueOnError)
	o.Adapter.FlagSet = all
	o.Adapter.InstallFlags()
	server := o.Adapter.CustomMetricsAdapterServerOptions
	server.SecureServing.AddFlags(fss.FlagSet("API server secure serving"))
	server.Authentication.AddFlags(fss.FlagSet("API server authentication"))
	server.Authorization.AddFlags(fss.FlagSet("API server authorization"))
	server.Audit.AddFlags(fss.FlagSet("API server audit"))
	server.Features.AddFlags(fss.FlagSet("API server features"))
	client := fss.FlagSet("API server Kubernetes client")
	for _, name := range []string{"lister-kubeconfig", "discovery-interval", "client-qps", "client-burst"} {
		client.AddFlag(all.Lookup(name))
	}

	logging := fss.FlagSet("logging")
	logsapi.AddFlags(o.Logging, logging)
	// Split output streams need the LoggingAlphaOptions feature gate, which
	// the adapter does not offer: --help does not list them.
	for _, name := range []string{"log-text-split-stream", "log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size"} {
		_ = logging.MarkHidden(name)
	}
	return fss
}

// AddFlags registers all of Flags' sections on fs, for parsing.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fss := o.Flags()
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
}

// Complete sets the defaults that follow other flags, for the flags fs did
// not set: as in Prometheus, an unset --scrape-timeout is the default or
// --scrape-interval, whichever is shorter; an unset --max-age is the default
// or three scrape intervals, whichever is longer; an unset
// --answer-cache-ttl is 1s or a quarter of --scrape-interval, whichever is
// shorter; an unset --slo-window is 1m or six scrape intervals, whichever is
// longer; an unset --max-selectors
// is at least --max-selectors-per-namespace. A value set explicitly is kept,
// so that Validate reports a contradiction between two flags the user set.
func (o *Options) Complete(fs *pflag.FlagSet) {
	if !fs.Changed("scrape-timeout") && o.ScrapeInterval > 0 {
		o.ScrapeTimeout = min(scrape.DefaultConfig().Timeout, o.ScrapeInterval)
	}
	if !fs.Changed("max-age") && o.ScrapeInterval > 0 {
		o.MaxAge = max(defaultMaxAge, 3*o.ScrapeInterval)
	}
	if !fs.Changed("slo-window") && o.ScrapeInterval > 0 {
		o.SLOWindow = max(store.DefaultSLOWindow, store.WindowAnchors*o.ScrapeInterval)
	}
	if !fs.Changed("answer-cache-ttl") && o.ScrapeInterval > 0 {
		o.AnswerCacheTTL = min(defaultAnswerCacheTTL, o.ScrapeInterval/4)
	}
	if !fs.Changed("max-selectors") {
		o.MaxSelectors = max(targets.DefaultMaxSelectors, o.MaxSelectorsPerNamespace)
	}
}

// addOwnFlags registers the adapter's own flags on fss, one section per
// concern; --help lists each section's flags by name: scraping
// (the HTTPS credentials among them), which pods are scraped and for how
// long (targets and demand), how answers are made and served, the GPU
// agents, the demand forecast and the KEDA port.
func (o *Options) addOwnFlags(fss *cliflag.NamedFlagSets) {
	fs := fss.FlagSet("scraping")
	fs.DurationVar(&o.ScrapeInterval, "scrape-interval", o.ScrapeInterval, "How often each target pod's /metrics page is scraped.")
	fs.DurationVar(&o.ScrapeTimeout, "scrape-timeout", o.ScrapeTimeout, "Time limit for one scrape of one pod. Unset, it is 3s or --scrape-interval, whichever is shorter; set, it must not exceed --scrape-interval.")
	fs.Int64Var(&o.MaxBodySize, "max-body-size", o.MaxBodySize, "Largest /metrics page accepted, in bytes (after decompression). Larger pages fail with reason body_too_large.")
	fs.BoolVar(&o.ScrapeGzip, "scrape-gzip", o.ScrapeGzip, "Ask model servers for gzip-compressed pages. Off by default: on-the-fly compression costs the model server CPU on every scrape. Gzip bodies sent unasked are read either way.")
	fs.IntVar(&o.ScrapeConcurrency, "scrape-concurrency", o.ScrapeConcurrency, "Most background scrapes in flight at once, over all targets. Worst-case page memory is (scrape-concurrency + first-scrape-concurrency) x max-body-size.")
	fs.IntVar(&o.NamespaceScrapeConcurrency, "scrape-concurrency-per-namespace", o.NamespaceScrapeConcurrency, "Most background scrapes the pods of one namespace hold at once, so that one namespace's slow or hanging pages cannot take every scrape worker from the others. 0 means half of --scrape-concurrency.")
	fs.IntVar(&o.FirstScrapeConcurrency, "first-scrape-concurrency", o.FirstScrapeConcurrency, "Most first scrapes (of never-scraped pods the API is asked about) in flight at once; the pods of one namespace hold at most half of them. A pool of their own: they never delay the background scrapes.")
	fs.DurationVar(&o.FirstScrapeTimeout, "first-scrape-timeout", o.FirstScrapeTimeout, "Time limit for scraping never-scraped pods when the API is first asked about them. Zero disables the first scrape: the first answer then waits for the background loop.")
	fs.StringVar(&o.ServerConfig, "server-config", o.ServerConfig, "Path to a YAML file that maps custom model servers' series to the signals (docs/servers.md). Empty means the built-in servers only.")
	o.ScrapeTLS.addFlags(fs)

	fs = fss.FlagSet("targets and demand")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig for reading pods and workloads. Empty means in-cluster configuration. Same as --lister-kubeconfig.")
	fs.StringSliceVar(&o.Namespaces, "namespaces", o.Namespaces, "Namespaces whose pods may be scraped (comma-separated). Empty means all namespaces.")
	fs.DurationVar(&o.DemandTTL, "demand-ttl", o.DemandTTL, "A label selector the API was asked about keeps its pods scraped for this long after the last question; a question about a latency percentile keeps the latency histograms of the pods it covered parsed for this long.")
	fs.IntVar(&o.MaxSelectorsPerNamespace, "max-selectors-per-namespace", o.MaxSelectorsPerNamespace, "Most label selectors (and pods asked about by name) kept as demand per namespace; past it the least recently asked goes.")
	fs.BoolVar(&o.LeaderWorkerSets, "leader-worker-sets", o.LeaderWorkerSets, "Serve object metrics for LeaderWorkerSets (leaderworkerset.x-k8s.io), a group of pods being one replica (docs/leaderworkerset.md). Needs RBAC to list and watch them (the chart's leaderWorkerSet.enabled); until their CRD is served and that RBAC granted, the adapter watches none, answers their questions 404 saying why, and looks again every --leader-worker-sets-recheck.")
	fs.DurationVar(&o.LeaderWorkerSetsRecheck, "leader-worker-sets-recheck", o.LeaderWorkerSetsRecheck, "With --leader-worker-sets, how often the adapter looks for the LeaderWorkerSet CRD (and its RBAC) while it watches none: installed after the adapter started, they are served within this period, without a restart. Between 1s and 1h.")
	fs.IntVar(&o.MaxSelectors, "max-selectors", o.MaxSelectors, "Most label selectors (and pods asked about by name) kept as demand over all namespaces; past it the least recently asked of the namespace holding the most goes. Unset, it is at least --max-selectors-per-namespace.")

	fs = fss.FlagSet("answers")
	fs.DurationVar(&o.MaxAge, "max-age", o.MaxAge, "A pod whose last good scrape is older than this is left out of answers. Unset, it is 15s or three --scrape-interval, whichever is longer; set, it must be at least --scrape-interval.")
	fs.DurationVar(&o.SLOWindow, "slo-window", o.SLOWindow, "Sliding window of the latency percentiles (inference_*_p50/p90/p99_seconds): they cover the requests that finished in the last window, from the servers' histogram bucket deltas. Unset, it is 1m or six --scrape-interval, whichever is longer; set, it must be between two --scrape-interval and 1h.")
	fs.StringVar(&o.RoleLabel, "role-label", defaultRoleLabel, "Pod label whose value a role=VALUE metric selector (role=prefill, role=decode) restricts a question to, for disaggregated prefill/decode serving (docs/disaggregated.md). llm-d labels its pods llm-d.ai/role.")
	fs.DurationVar(&o.AnswerCacheTTL, "answer-cache-ttl", o.AnswerCacheTTL, "How long an answer is kept and given to callers asking the same question (after each caller's authorization), so that many callers share one computation; never past --max-age of its oldest value. Unset, it is 1s or a quarter of --scrape-interval, whichever is shorter; 0 disables the cache.")
	fs.BoolVar(&o.EnableExternal, "enable-external-metrics", o.EnableExternal, "Also serve external.metrics.k8s.io. Only one adapter in a cluster can own that API (KEDA often does).")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay, "After SIGTERM, keep serving this long with /readyz failing before closing the port, so that kube-apiserver stops sending requests first. At most 5m.")

	fs = fss.FlagSet("GPU agent")
	fs.StringVar(&o.GPUAgentSelector, "gpu-agent-selector", o.GPUAgentSelector, "Label selector of the gpu-agent pods whose pages carry per-pod GPU activity. Empty disables GPU metrics.")
	fs.StringVar(&o.GPUAgentNamespace, "gpu-agent-namespace", o.GPUAgentNamespace, "Namespace of the gpu-agent pods: only DaemonSet pods there are trusted as agents. Empty means the adapter's own namespace (env POD_NAMESPACE, else the service account's namespace file). With --namespaces, this namespace is watched too.")

	fs = fss.FlagSet("forecast")
	fs.StringVar(&o.ForecastMethod, "forecast-method", o.ForecastMethod, "Estimator of inference_demand_forecast_per_replica when the metric selector names none (method=...): envelope (the largest demand in the last horizon), holt (Holt's linear trend over the window, a horizon ahead), staffing (the demand plus z x sqrt(dispersion x demand)) or auto (staffing while the arrivals have been bursty, see --forecast-auto-burstiness; holt otherwise).")
	fs.DurationVar(&o.ForecastWindow, "forecast-window", o.ForecastWindow, "History the demand forecast reads (holt and staffing fit it; the dispersion is measured over it). A workload's history idle for twice the longer of it and --forecast-floor-window is dropped.")
	fs.StringVar(&o.ForecastHorizon, "forecast-horizon", o.ForecastHorizon, "How far ahead the demand forecast looks: auto (the longest start-up time of the workload's Ready pods, Ready condition's last transition less creation, clamped to one --scrape-interval and 10m) or a duration, at most --forecast-window.")
	fs.Float64Var(&o.ForecastZ, "forecast-z", o.ForecastZ, "Safety factor z of the staffing forecast's headroom z x sqrt(dispersion x demand); 1.645 covers 95% of Poisson arrivals. At least 0.")
	fs.Float64Var(&o.ForecastHoltAlpha, "forecast-holt-alpha", o.ForecastHoltAlpha, "Level smoothing of the holt forecast, in (0, 1].")
	fs.Float64Var(&o.ForecastHoltBeta, "forecast-holt-beta", o.ForecastHoltBeta, "Trend smoothing of the holt forecast, in (0, 1].")
	fs.Float64Var(&o.ForecastFloor, "forecast-floor", o.ForecastFloor, "Share, in [0, 1], of the workload's largest demand in the last --forecast-floor-window below which the demand forecast does not fall, for every method; 0 is no floor. A metric selector floor=... sets it per question.")
	fs.DurationVar(&o.ForecastFloorWindow, "forecast-floor-window", o.ForecastFloorWindow, "Span whose largest demand the forecast's floor is a share of, above 0 and at most 30m. The histories keep 64 samples over the longer of it and --forecast-window.")
	fs.DurationVar(&o.ForecastRateFloor, "forecast-rate-floor", o.ForecastRateFloor, "Time in system, from 0 to 1m, that the workload's largest arrival rate in the last --forecast-floor-window is multiplied by for a floor under the demand forecast (every method): the requests that rate keeps in the system by Little's law. Set to the time a request spends in a replica at SLO capacity, it holds replicas for the largest recent rate. 0 is no rate floor. A metric selector ratefloor=... sets it per question.")
	fs.Float64Var(&o.ForecastAutoBursty, "forecast-auto-burstiness", o.ForecastAutoBursty, "Threshold of the auto forecast method: staffing when the arrivals' burstiness over the history (the longer of --forecast-window and --forecast-floor-window), the squared coefficient of variation of their rate per sample interval, is at least this; holt below it. 0.25 is a rate whose standard deviation is half its mean. At least 0.")
	fs.IntVar(&o.ForecastMaxWorkloads, "forecast-max-workloads", o.ForecastMaxWorkloads, "Most workload demand histories the forecast keeps (about 1.5 KB each); past it the least recently asked goes, and one namespace holds at most a quarter of them.")

	fs = fss.FlagSet("KEDA")
	fs.StringVar(&o.KEDAScalerAddress, "keda-scaler-address", o.KEDAScalerAddress, "Serve KEDA's external scaler gRPC API (externalscaler.proto) on this host:port, e.g. :9443, for ScaledObjects with an external trigger (docs/keda.md). It uses the API server's serving certificate (--tls-cert-file, or the self-signed one). Empty means off.")
	fs.StringVar(&o.KEDAScalerClientCAFile, "keda-scaler-client-ca-file", o.KEDAScalerClientCAFile, "With --keda-scaler-address: require client certificates signed by this CA bundle (KEDA's tlsClientCert and tlsClientKey), each certificate's subject (CN the user, O the groups) allowed the namespaces --keda-scaler-grant or --keda-scaler-subject-access-review allow it. Empty: callers have no identity, which needs --keda-scaler-allow-unauthenticated.")
	fs.BoolVar(&o.KEDAScalerPlaintext, "keda-scaler-plaintext", o.KEDAScalerPlaintext, "With --keda-scaler-address: serve without TLS (KEDA's trigger without enableTLS). Callers then have no identity: it needs --keda-scaler-allow-unauthenticated.")
	fs.StringArrayVar(&o.KEDAScalerGrants, "keda-scaler-grant", o.KEDAScalerGrants, "With --keda-scaler-client-ca-file: allow a client certificate's user (CN) or group (O) the namespaces listed, as user:NAME=NS[,NS...] or group:NAME=NS[,NS...], NS * for every namespace, e.g. user:keda-operator=*. Repeat the flag for more.")
	fs.BoolVar(&o.KEDAScalerSubjectAccessReview, "keda-scaler-subject-access-review", o.KEDAScalerSubjectAccessReview, "With --keda-scaler-client-ca-file: also allow a client certificate's user a namespace where the API server's authorization (a SubjectAccessReview, cached as for the API port) lets it get the same metric of custom.metrics.k8s.io.")
	fs.BoolVar(&o.KEDAScalerAllowUnauthenticated, "keda-scaler-allow-unauthenticated", o.KEDAScalerAllowUnauthenticated, "With --keda-scaler-address and no --keda-scaler-client-ca-file: let callers without a client certificate ask about any namespace's values. Only for a port that nothing but KEDA can reach (a NetworkPolicy); logged as a warning at start.")
	fs.IntVar(&o.KEDAScalerMaxConnections, "keda-scaler-max-connections", o.KEDAScalerMaxConnections, "With --keda-scaler-address: most connections open to the KEDA port at once; one past it is closed as it is accepted. KEDA's operator holds a few.")
	fs.IntVar(&o.KEDAScalerMaxStreams, "keda-scaler-max-streams", o.KEDAScalerMaxStreams, "With --keda-scaler-address: most KEDA scaler calls and StreamIsActive streams in flight at once, over all connections; one past it fails with ResourceExhausted. KEDA holds a stream per external-push trigger and a call per poll.")
}

// Validate reports every invalid or contradictory setting at once.
func (o *Options) Validate() error {
	var errs []error
	if o.ScrapeInterval <= 0 {
		errs = append(errs, fmt.Errorf("--scrape-interval must be positive, got %s", o.ScrapeInterval))
	}
	if o.ScrapeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--scrape-timeout must be positive, got %s", o.ScrapeTimeout))
	}
	if o.ScrapeInterval > 0 && o.ScrapeTimeout > o.ScrapeInterval {
		errs = append(errs, fmt.Errorf("--scrape-timeout (%s) must not exceed --scrape-interval (%s)", o.ScrapeTimeout, o.ScrapeInterval))
	}
	if o.MaxAge < o.ScrapeInterval {
		errs = append(errs, fmt.Errorf("--max-age (%s) must be at least --scrape-interval (%s), or every value would be stale between scrapes", o.MaxAge, o.ScrapeInterval))
	}
	if o.MaxBodySize < 1024 {
		errs = append(errs, fmt.Errorf("--max-body-size must be at least 1024 bytes, got %d", o.MaxBodySize))
	}
	if o.ScrapeConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--scrape-concurrency must be at least 1, got %d", o.ScrapeConcurrency))
	}
	if o.NamespaceScrapeConcurrency < 0 || o.NamespaceScrapeConcurrency > o.ScrapeConcurrency {
		errs = append(errs, fmt.Errorf("--scrape-concurrency-per-namespace must be between 0 and --scrape-concurrency (%d), got %d", o.ScrapeConcurrency, o.NamespaceScrapeConcurrency))
	}
	if o.FirstScrapeConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--first-scrape-concurrency must be at least 1, got %d", o.FirstScrapeConcurrency))
	}
	if err := o.validateMemoryBudget(debug.SetMemoryLimit(-1)); err != nil {
		errs = append(errs, err)
	}
	if o.LeaderWorkerSetsRecheck < time.Second || o.LeaderWorkerSetsRecheck > time.Hour {
		errs = append(errs, fmt.Errorf("--leader-worker-sets-recheck must be between 1s and 1h, got %s", o.LeaderWorkerSetsRecheck))
	}
	if o.SLOWindow < 2*o.ScrapeInterval || o.SLOWindow > time.Hour {
		errs = append(errs, fmt.Errorf("--slo-window must be between 2 --scrape-interval (%s) and 1h, got %s", 2*o.ScrapeInterval, o.SLOWindow))
	}
	if o.DemandTTL < o.ScrapeInterval {
		errs = append(errs, fmt.Errorf("--demand-ttl (%s) must be at least --scrape-interval (%s)", o.DemandTTL, o.ScrapeInterval))
	}
	if o.AnswerCacheTTL < 0 || (o.ScrapeInterval > 0 && o.AnswerCacheTTL > o.ScrapeInterval) {
		errs = append(errs, fmt.Errorf("--answer-cache-ttl must be between 0 and --scrape-interval (%s), got %s", o.ScrapeInterval, o.AnswerCacheTTL))
	}
	if o.ShutdownDelay < 0 || o.ShutdownDelay > 5*time.Minute {
		errs = append(errs, fmt.Errorf("--shutdown-delay must be between 0 and 5m, got %s", o.ShutdownDelay))
	}
	if o.FirstScrapeTimeout < 0 {
		errs = append(errs, fmt.Errorf("--first-scrape-timeout must not be negative, got %s", o.FirstScrapeTimeout))
	}
	errs = append(errs, o.validateKEDAScaler()...)
	errs = append(errs, o.validateForecast()...)
	if err := validateRoleLabel(o.RoleLabel); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.validateKEDAScalerLimits()...)
	for _, ns := range o.Namespaces {
		if strings.TrimSpace(ns) == "" {
			errs = append(errs, fmt.Errorf("--namespaces has an empty entry"))
		}
	}
	if _, err := labels.Parse(o.GPUAgentSelector); err != nil {
		errs = append(errs, fmt.Errorf("--gpu-agent-selector: %w", err))
	}
	if o.MaxSelectorsPerNamespace < 1 {
		errs = append(errs, fmt.Errorf("--max-selectors-per-namespace must be at least 1, got %d", o.MaxSelectorsPerNamespace))
	}
	if o.MaxSelectors < o.MaxSelectorsPerNamespace {
		errs = append(errs, fmt.Errorf("--max-selectors (%d) must be at least --max-selectors-per-namespace (%d)", o.MaxSelectors, o.MaxSelectorsPerNamespace))
	}
	if err := o.resolveAgentNamespace(); err != nil {
		errs = append(errs, err)
	}
	if o.Adapter.RemoteKubeConfigFile != "" && o.Kubeconfig != "" && o.Adapter.RemoteKubeConfigFile != o.Kubeconfig {
		errs = append(errs, fmt.Errorf("--kubeconfig and --lister-kubeconfig name different files; set one"))
	}
	o.servers = nil
	if o.ServerConfig != "" {
		servers, scrapeSettings, err := dialect.LoadFile(o.ServerConfig)
		if err != nil {
			errs = append(errs, fmt.Errorf("--server-config: %w", err))
		}
		o.servers, o.serverScrape = servers, serverScrapeSettings(scrapeSettings)
	}
	errs = append(errs, o.ScrapeTLS.validate()...)
	if errList := o.Adapter.Validate(); len(errList) > 0 {
		errs = append(errs, errList...)
	}
	if errList := logsapi.Validate(o.Logging, nil, nil); len(errList) > 0 {
		errs = append(errs, errList.ToAggregate().Errors()...)
	}
	return errors.Join(errs...)
}

// validateMemoryBudget refuses scrape settings whose worst-case memory,
// (--scrape-concurrency + --first-scrape-concurrency) × --max-body-size of
// page buffers plus the KEDA port's worst case plus --forecast-max-workloads
// × forecast.MaxBytesPerHistory of demand histories plus
// --scrape-max-kept-tls-connections × scrape.KeptTLSConnectionBytes,
// exceeds half of the process memory limit (math.MaxInt64: none).
func (o *Options) validateMemoryBudget(limit int64) error {
	if limit == math.MaxInt64 || limit <= 0 || o.ScrapeConcurrency < 1 || o.FirstScrapeConcurrency < 1 || o.MaxBodySize < 1 {
		return nil
	}
	workers := int64(o.ScrapeConcurrency) + int64(o.FirstScrapeConcurrency)
	keda := o.kedaScalerWorstCase()
	histories := o.forecastHistoriesWorstCase()
	keptTLS := o.keptTLSConnectionsWorstCase()
	if fixed := keda + histories + keptTLS; fixed < limit/2 && o.MaxBodySize <= (limit/2-fixed)/workers {
		return nil
	}
	kedaText := ""
	if keda > 0 {
		kedaText = fmt.Sprintf(", plus %d bytes for the KEDA port's connections and calls at worst (--keda-scaler-max-connections %d, --keda-scaler-max-streams %d)",
			keda, o.KEDAScalerMaxConnections, o.KEDAScalerMaxStreams)
	}
	historiesText := ""
	if histories > 0 {
		historiesText = fmt.Sprintf(", plus %d bytes for the forecast's demand histories at most (--forecast-max-workloads %d x %d bytes)",
			histories, o.ForecastMaxWorkloads, forecast.MaxBytesPerHistory)
	}
	keptTLSText := ""
	if keptTLS > 0 {
		keptTLSText = fmt.Sprintf(", plus %d bytes for kept TLS scrape connections at most (--scrape-max-kept-tls-connections %d x %d bytes)",
			keptTLS, o.ScrapeTLS.MaxKeptConnections, scrape.KeptTLSConnectionBytes)
	}
	return fmt.Errorf("(--scrape-concurrency %d + --first-scrape-concurrency %d) x --max-body-size %d = %d bytes of page buffers at worst%s%s%s, more than half of the memory limit of %d bytes; lower these flags or raise the limit (GOMEMLIMIT or the container's)",
		o.ScrapeConcurrency, o.FirstScrapeConcurrency, o.MaxBodySize, workers*o.MaxBodySize, kedaText, historiesText, keptTLSText, limit)
}

// keptTLSConnectionsWorstCase is the memory the kept HTTPS scrape
// connections can hold: --scrape-max-kept-tls-connections ×
// scrape.KeptTLSConnectionBytes, saturating at a quarter of math.MaxInt64
// so that the budget's sum cannot overflow; 0 for a negative bound
// (Validate says so). It is counted whatever the configured scrape
// settings: any pod can choose HTTPS with its prometheus.io/scheme
// annotation, verified against the system's roots without --scrape-ca-file.
func (o *Options) keptTLSConnectionsWorstCase() int64 {
	const most = math.MaxInt64 / 4 / scrape.KeptTLSConnectionBytes
	return min(int64(max(0, o.ScrapeTLS.MaxKeptConnections)), most) * scrape.KeptTLSConnectionBytes
}

// forecastHistoriesWorstCase is the heap the forecast's demand histories can
// hold: --forecast-max-workloads full histories (at least one, as the
// forecast keeps), saturating at a quarter of math.MaxInt64 so that the
// budget's sum cannot overflow.
func (o *Options) forecastHistoriesWorstCase() int64 {
	const most = math.MaxInt64 / 4 / forecast.MaxBytesPerHistory
	return min(int64(max(1, o.ForecastMaxWorkloads)), most) * forecast.MaxBytesPerHistory
}

// kedaScalerWorstCase is the heap the KEDA port's clients can hold at
// worst: 0 when the port is off or its limits are invalid (Validate says
// so).
func (o *Options) kedaScalerWorstCase() int64 {
	if o.KEDAScalerAddress == "" || o.validateKEDAScalerLimits() != nil {
		return 0
	}
	return kedascaler.Limits{MaxConnections: o.KEDAScalerMaxConnections, MaxStreams: o.KEDAScalerMaxStreams}.WorstCaseBytes()
}

// validateKEDAScalerLimits checks --keda-scaler-max-connections and
// --keda-scaler-max-streams.
func (o *Options) validateKEDAScalerLimits() []error {
	var errs []error
	if o.KEDAScalerMaxConnections < 1 || o.KEDAScalerMaxConnections > kedascaler.MaxLimit {
		errs = append(errs, fmt.Errorf("--keda-scaler-max-connections must be between 1 and %d, got %d", kedascaler.MaxLimit, o.KEDAScalerMaxConnections))
	}
	if o.KEDAScalerMaxStreams < 1 || o.KEDAScalerMaxStreams > kedascaler.MaxLimit {
		errs = append(errs, fmt.Errorf("--keda-scaler-max-streams must be between 1 and %d, got %d", kedascaler.MaxLimit, o.KEDAScalerMaxStreams))
	}
	return errs
}

// Config turns validated options into the server's configuration.
func (o *Options) Config() (*server.Config, error) {
	if o.Kubeconfig != "" {
		o.Adapter.RemoteKubeConfigFile = o.Kubeconfig
	}
	if err := o.resolveAgentNamespace(); err != nil { // Validate was not called
		return nil, err
	}
	var agentSel labels.Selector
	if o.GPUAgentSelector != "" {
		sel, err := labels.Parse(o.GPUAgentSelector)
		if err != nil {
			return nil, fmt.Errorf("--gpu-agent-selector: %w", err)
		}
		agentSel = sel
	}
	servers := o.servers
	if servers == nil && o.ServerConfig != "" { // Validate was not called
		var err error
		var settings map[string]dialect.Scrape
		if servers, settings, err = dialect.LoadFile(o.ServerConfig); err != nil {
			return nil, fmt.Errorf("--server-config: %w", err)
		}
		o.serverScrape = serverScrapeSettings(settings)
	}
	grants, err := kedaGrants(o.KEDAScalerGrants)
	if err != nil {
		return nil, err
	}
	namespaces := o.Namespaces
	if len(namespaces) > 0 && agentSel != nil && o.GPUAgentNamespace != "" && !slices.Contains(namespaces, o.GPUAgentNamespace) {
		// The agents' pods must be watched to be found.
		namespaces = append(slices.Clone(namespaces), o.GPUAgentNamespace)
	}
	return &server.Config{
		Adapter: o.Adapter,
		Scrape: scrape.Config{
			Interval:             o.ScrapeInterval,
			Timeout:              o.ScrapeTimeout,
			MaxBodySize:          o.MaxBodySize,
			Concurrency:          o.ScrapeConcurrency,
			NamespaceConcurrency: o.NamespaceScrapeConcurrency,
			FirstConcurrency:     o.FirstScrapeConcurrency,
			Jitter:               scrape.DefaultConfig().Jitter,
			RequestGzip:          o.ScrapeGzip,
			Servers:              servers,
			TLS:                  o.ScrapeTLS.config(),

			MaxKeptTLSConnections: o.ScrapeTLS.MaxKeptConnections,
		},
		ServerScrape:            o.serverScrape,
		MaxAge:                  o.MaxAge,
		SLOWindow:               o.SLOWindow,
		Namespaces:              namespaces,
		DemandTTL:               o.DemandTTL,
		FirstScrapeTimeout:      o.FirstScrapeTimeout,
		GPUAgentSelector:        agentSel,
		GPUAgentNamespace:       o.GPUAgentNamespace,
		EnableExternal:          o.EnableExternal,
		ShutdownDelay:           o.ShutdownDelay,
		AnswerCacheTTL:          o.AnswerCacheTTL,
		RoleLabel:               o.RoleLabel,
		LeaderWorkerSets:        o.LeaderWorkerSets,
		LeaderWorkerSetsRecheck: o.LeaderWorkerSetsRecheck,
		Forecast:                o.forecastConfig(),
		KEDAScaler: server.KEDAScalerConfig{
			Address:              o.KEDAScalerAddress,
			MaxConnections:       o.KEDAScalerMaxConnections,
			MaxStreams:           o.KEDAScalerMaxStreams,
			ClientCAFile:         o.KEDAScalerClientCAFile,
			Plaintext:            o.KEDAScalerPlaintext,
			Grants:               grants,
			SubjectAccessReview:  o.KEDAScalerSubjectAccessReview,
			AllowUnauthenticated: o.KEDAScalerAllowUnauthenticated,
		},

		MaxSelectorsPerNamespace: o.MaxSelectorsPerNamespace,
		MaxSelectors:             o.MaxSelectors,
	}, nil
}

// forecastHorizon is --forecast-horizon: 0 for auto.
func (o *Options) forecastHorizon() (time.Duration, error) {
	if o.ForecastHorizon == forecastHorizonAuto {
		return 0, nil
	}
	d, err := time.ParseDuration(o.ForecastHorizon)
	if err != nil {
		return 0, fmt.Errorf("--forecast-horizon must be auto or a duration, got %q", o.ForecastHorizon)
	}
	if d <= 0 || d > o.ForecastWindow {
		return 0, fmt.Errorf("--forecast-horizon must be auto or a duration above 0 and at most --forecast-window (%s), got %s", o.ForecastWindow, d)
	}
	return d, nil
}

// validateForecast checks the --forecast-* flags.
func (o *Options) validateForecast() []error {
	var errs []error
	if _, err := forecast.ParseMethod(o.ForecastMethod); err != nil {
		errs = append(errs, fmt.Errorf("--forecast-method: %w", err))
	}
	if o.ForecastWindow <= 0 {
		errs = append(errs, fmt.Errorf("--forecast-window must be positive, got %s", o.ForecastWindow))
	} else if _, err := o.forecastHorizon(); err != nil {
		errs = append(errs, err)
	}
	if !(o.ForecastZ >= 0) || math.IsInf(o.ForecastZ, 0) {
		errs = append(errs, fmt.Errorf("--forecast-z must be a finite number of at least 0, got %g", o.ForecastZ))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"--forecast-holt-alpha", o.ForecastHoltAlpha}, {"--forecast-holt-beta", o.ForecastHoltBeta}} {
		if !(f.v > 0 && f.v <= 1) {
			errs = append(errs, fmt.Errorf("%s must be in (0, 1], got %g", f.name, f.v))
		}
	}
	if !(o.ForecastFloor >= 0 && o.ForecastFloor <= 1) {
		errs = append(errs, fmt.Errorf("--forecast-floor must be in [0, 1] (a share of the largest recent demand), got %g", o.ForecastFloor))
	}
	if o.ForecastFloorWindow <= 0 || o.ForecastFloorWindow > forecast.MaxFloorWindow {
		errs = append(errs, fmt.Errorf("--forecast-floor-window must be above 0 and at most %s (a history keeps %d samples), got %s", forecast.MaxFloorWindow, forecast.MaxSamples, o.ForecastFloorWindow))
	}
	if o.ForecastRateFloor < 0 || o.ForecastRateFloor > forecast.MaxRateFloor {
		errs = append(errs, fmt.Errorf("--forecast-rate-floor must be from 0 to %s (a request's time in system at SLO capacity), got %s", forecast.MaxRateFloor, o.ForecastRateFloor))
	}
	if !(o.ForecastAutoBursty >= 0) || math.IsInf(o.ForecastAutoBursty, 0) {
		errs = append(errs, fmt.Errorf("--forecast-auto-burstiness must be a finite number of at least 0, got %g", o.ForecastAutoBursty))
	}
	if o.ForecastMaxWorkloads < 1 {
		errs = append(errs, fmt.Errorf("--forecast-max-workloads must be at least 1, got %d", o.ForecastMaxWorkloads))
	}
	return errs
}

// forecastConfig is the provider's forecast configuration from the flags
// (Validate checks them).
func (o *Options) forecastConfig() provider.ForecastConfig {
	horizon, _ := o.forecastHorizon()
	return provider.ForecastConfig{
		Method:       forecast.Method(o.ForecastMethod),
		Window:       o.ForecastWindow,
		Horizon:      horizon,
		Z:            o.ForecastZ,
		Alpha:        o.ForecastHoltAlpha,
		Beta:         o.ForecastHoltBeta,
		Floor:        o.ForecastFloor,
		FloorWindow:  o.ForecastFloorWindow,
		RateFloor:    o.ForecastRateFloor,
		Bursty:       o.ForecastAutoBursty,
		MaxWorkloads: o.ForecastMaxWorkloads,
	}
}

// validateKEDAScaler checks the --keda-scaler-* flags: a port that answers
// callers without a client certificate is an explicit choice
// (--keda-scaler-allow-unauthenticated), and a port that requires one has a
// rule that can allow some caller.
func (o *Options) validateKEDAScaler() []error {
	if o.KEDAScalerAddress == "" {
		if o.KEDAScalerClientCAFile != "" || o.KEDAScalerPlaintext || len(o.KEDAScalerGrants) > 0 || o.KEDAScalerSubjectAccessReview || o.KEDAScalerAllowUnauthenticated {
			return []error{fmt.Errorf("--keda-scaler-client-ca-file, --keda-scaler-plaintext, --keda-scaler-grant, --keda-scaler-subject-access-review and --keda-scaler-allow-unauthenticated need --keda-scaler-address")}
		}
		return nil
	}
	var errs []error
	if _, port, err := net.SplitHostPort(o.KEDAScalerAddress); err != nil || port == "" {
		errs = append(errs, fmt.Errorf("--keda-scaler-address %q must be host:port, e.g. :9443", o.KEDAScalerAddress))
	}
	if o.KEDAScalerPlaintext && o.KEDAScalerClientCAFile != "" {
		errs = append(errs, fmt.Errorf("--keda-scaler-client-ca-file needs TLS: it cannot go with --keda-scaler-plaintext"))
	}
	if o.KEDAScalerClientCAFile != "" {
		if _, err := os.Stat(o.KEDAScalerClientCAFile); err != nil {
			errs = append(errs, fmt.Errorf("--keda-scaler-client-ca-file: %w", err))
		}
	}
	if _, err := kedaGrants(o.KEDAScalerGrants); err != nil {
		errs = append(errs, err)
	}
	switch {
	case o.KEDAScalerClientCAFile == "" && (len(o.KEDAScalerGrants) > 0 || o.KEDAScalerSubjectAccessReview):
		errs = append(errs, fmt.Errorf("--keda-scaler-grant and --keda-scaler-subject-access-review need --keda-scaler-client-ca-file: only a client certificate names a caller"))
	case o.KEDAScalerClientCAFile == "" && !o.KEDAScalerAllowUnauthenticated:
		errs = append(errs, fmt.Errorf("--keda-scaler-address without --keda-scaler-client-ca-file answers anyone who reaches the port, about any namespace: set --keda-scaler-client-ca-file with --keda-scaler-grant or --keda-scaler-subject-access-review, or accept that with --keda-scaler-allow-unauthenticated"))
	case o.KEDAScalerClientCAFile != "" && o.KEDAScalerAllowUnauthenticated:
		errs = append(errs, fmt.Errorf("--keda-scaler-allow-unauthenticated cannot go with --keda-scaler-client-ca-file, which requires a client certificate of every caller"))
	case o.KEDAScalerClientCAFile != "" && len(o.KEDAScalerGrants) == 0 && !o.KEDAScalerSubjectAccessReview:
		errs = append(errs, fmt.Errorf("--keda-scaler-client-ca-file needs --keda-scaler-grant or --keda-scaler-subject-access-review: otherwise no caller may ask about any namespace"))
	}
	return errs
}

// kedaGrants parses the --keda-scaler-grant values.
func kedaGrants(values []string) ([]kedascaler.Grant, error) {
	var grants []kedascaler.Grant
	var errs []error
	for _, v := range values {
		g, err := kedascaler.ParseGrant(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--keda-scaler-grant: %w", err))
			continue
		}
		grants = append(grants, g)
	}
	return grants, errors.Join(errs...)
}

// serviceAccountNamespaceFile holds the pod's namespace in every pod that
// mounts a service account token.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// resolveAgentNamespace defaults --gpu-agent-namespace to the adapter's own
// namespace when GPU metrics are on: agents are trusted only in one
// namespace, never in any.
func (o *Options) resolveAgentNamespace() error {
	if o.GPUAgentSelector == "" || o.GPUAgentNamespace != "" {
		return nil
	}
	if ns := strings.TrimSpace(os.Getenv("POD_NAMESPACE")); ns != "" {
		o.GPUAgentNamespace = ns
		return nil
	}
	b, err := os.ReadFile(o.namespaceFile)
	if err == nil && strings.TrimSpace(string(b)) != "" {
		o.GPUAgentNamespace = strings.TrimSpace(string(b))
		return nil
	}
	if err == nil {
		err = fmt.Errorf("%s is empty", o.namespaceFile)
	}
	return fmt.Errorf("--gpu-agent-namespace is empty and the adapter's own namespace is unknown (no POD_NAMESPACE, %w): set --gpu-agent-namespace to the gpu-agents' namespace, or --gpu-agent-selector= to disable GPU metrics", err)
}
