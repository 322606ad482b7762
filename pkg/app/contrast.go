package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/contrast"
)

// contrastMain implements `inference-metrics-adapter contrast`: the
// side-by-side table of GPU activity and serving signals per pod, read
// through the API server like the HPA reads it.
func contrastMain(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("contrast", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "Path to a kubeconfig. Empty means $KUBECONFIG or ~/.kube/config, as kubectl.")
	kubeContext := fs.String("context", "", "kubeconfig context to use.")
	namespace := fs.StringP("namespace", "n", "", "Namespace of the pods. Empty means the kubeconfig context's namespace.")
	selector := fs.StringP("selector", "l", "", "Label selector of the pods, e.g. app=llm (required).")
	watch := fs.Duration("watch", 0, "Refresh every this long until interrupted (0: print once).")
	timeout := fs.Duration("request-timeout", 10*time.Second, "Time limit for each round of API requests.")
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: inference-metrics-adapter contrast -n NAMESPACE -l SELECTOR [flags]\n\nShows, per pod, GPU activity next to the model server's own saturation signals, with a reading.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 2
	}
	if *selector == "" {
		fmt.Fprintln(stderr, "error: --selector (-l) is required, e.g. -l app=llm")
		return 2
	}
	if *watch < 0 || *timeout <= 0 {
		fmt.Fprintln(stderr, "error: --watch must not be negative and --request-timeout must be positive")
		return 2
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *kubeContext})
	restConfig, err := cc.ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "error: loading kubeconfig: %v\n", err)
		return 1
	}
	ns := *namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			return 1
		}
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, *timeout)
		rows, err := contrast.Fetch(rctx, client, ns, *selector)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			if *watch == 0 {
				return 1
			}
		} else {
			if *watch > 0 {
				fmt.Fprintf(stdout, "\n%s  namespace %s, pods %s\n", time.Now().Format(time.TimeOnly), ns, *selector)
			}
			if err := contrast.Write(stdout, rows); err != nil {
				return 1
			}
		}
		if *watch == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(*watch):
		}
	}
}
