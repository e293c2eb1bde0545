package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/internal/redact"
)

// checkQueries is check --prometheus: Prometheus parses the report's
// analysis queries (ci.Report.CheckQueries).
func checkQueries(ctx context.Context, rep *ci.Report, url string, timeout time.Duration) error {
	p, err := analysis.New(url, analysis.Options{Timeout: timeout})
	if err != nil {
		return &UsageError{Err: err, Hint: "pass --prometheus http://prometheus:9090"}
	}
	if err := rep.CheckQueries(ctx, p); err != nil {
		return fmt.Errorf("--prometheus %s: %w%s", redact.URLs(url), err, timeoutHint(err))
	}
	return nil
}

// registerPrometheusTimeout is the --prometheus-timeout of serve, check
// and rollout analyze; then says what a query not answered in time does
// in that command.
func registerPrometheusTimeout(fs *pflag.FlagSet, d *time.Duration, then string) {
	fs.DurationVar(d, "prometheus-timeout", analysis.DefaultTimeout, "bound on each analysis query to --prometheus; one not answered by then "+then)
}

// checkPrometheusTimeout refuses a --prometheus-timeout of 0 or less, under
// which every query would fail at once.
func checkPrometheusTimeout(d time.Duration) error {
	if d > 0 {
		return nil
	}
	return usageErrorf("use a duration like --prometheus-timeout 10s, or leave it out for "+analysis.DefaultTimeout.String(),
		"--prometheus-timeout %s: want a positive duration", d)
}

// timeoutHint is what to add to an analysis error for people: how to wait
// longer when it is a query timing out, else "".
func timeoutHint(err error) string {
	if errors.Is(err, analysis.ErrTimeout) {
		return " (a slow Prometheus: raise --prometheus-timeout)"
	}
	return ""
}
