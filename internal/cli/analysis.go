package cli

import (
	"context"
	"fmt"

	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/internal/redact"
)

// checkQueries is check --prometheus: Prometheus parses the report's
// analysis queries (ci.Report.CheckQueries).
func checkQueries(ctx context.Context, rep *ci.Report, url string) error {
	p, err := analysis.New(url, analysis.Options{})
	if err != nil {
		return &UsageError{Err: err, Hint: "pass --prometheus http://prometheus:9090"}
	}
	if err := rep.CheckQueries(ctx, p); err != nil {
		return fmt.Errorf("--prometheus %s: %w", redact.URLs(url), err)
	}
	return nil
}
