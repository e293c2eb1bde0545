package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/redact"
)

// Options configures a Prometheus.
type Options struct {
	// Timeout bounds each query, at the client and as Prometheus's own
	// evaluation timeout; default DefaultTimeout (--prometheus-timeout of
	// serve, check and rollout analyze). A query not answered in time is
	// an error wrapping ErrTimeout. The
	// rollout controller measures a stage's metrics together, outside its
	// command loop, so a Prometheus that does not answer delays only the
	// verdict, never an operator's command.
	Timeout time.Duration
}

// DefaultTimeout bounds each query when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// Prometheus measures metrics over a Prometheus server's HTTP API.
type Prometheus struct {
	api     v1.API
	timeout time.Duration
}

// New returns a Prometheus for the server at address (its base URL, as
// "http://prometheus:9090"). It does no I/O.
func New(address string, o Options) (*Prometheus, error) {
	if address == "" {
		return nil, errors.New("new prometheus client: no address")
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("new prometheus client: timeout %s: want a positive duration", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	// url.Parse's error quotes the whole URL, password and all: parse
	// first and report only its reason.
	if _, err := url.Parse(address); err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("new prometheus client for %s: %w", redact.URLs(address), err)
	}
	c, err := api.NewClient(api.Config{Address: address})
	if err != nil {
		return nil, fmt.Errorf("new prometheus client for %s: %w", redact.URLs(address), err)
	}
	return &Prometheus{api: v1.NewAPI(c), timeout: o.Timeout}, nil
}

// Measure queries metric m at now for the cohort (the instances of cfg
// running version cohort) and the baseline (those running baseline): the
// query's value of each side, and its Samples query's when set; for
// Mann-Whitney, every point of the query over the last Interval, and the
// Samples query's value (else the number of points) per side. It
// returns an error when Prometheus cannot be reached or rejects a query,
// or when a query returns more than one series where one value is wanted.
func (p *Prometheus) Measure(ctx context.Context, m cuecast.Metric, cfg cuecast.ConfigPath, cohort, baseline uint64, now time.Time) (Result, error) {
	m = m.WithDefaults()
	r := Result{Cohort: math.NaN(), Baseline: math.NaN(), CohortSamples: math.NaN(), BaselineSamples: math.NaN()}
	var err error
	if m.Compare == cuecast.CompareMannWhitney {
		if r.CohortPoints, err = p.points(ctx, m.Expand(m.Query, cfg, cohort), now, time.Duration(m.Interval)); err != nil {
			return r, err
		}
		if r.BaselinePoints, err = p.points(ctx, m.Expand(m.Query, cfg, baseline), now, time.Duration(m.Interval)); err != nil {
			return r, err
		}
		r.CohortSamples, r.BaselineSamples = float64(len(r.CohortPoints)), float64(len(r.BaselinePoints))
		r.Cohort, r.Baseline = median(r.CohortPoints), median(r.BaselinePoints)
		if m.Samples != "" {
			// The samples query, not the points, is what min_samples
			// counts when there is one.
			if r.CohortSamples, err = p.value(ctx, m.Expand(m.Samples, cfg, cohort), now); err != nil {
				return r, err
			}
			if r.BaselineSamples, err = p.value(ctx, m.Expand(m.Samples, cfg, baseline), now); err != nil {
				return r, err
			}
		}
		return r, nil
	}
	if err := p.side(ctx, m, cfg, cohort, now, &r.Cohort, &r.CohortSamples); err != nil || m.Compare == cuecast.CompareThreshold {
		return r, err
	}
	return r, p.side(ctx, m, cfg, baseline, now, &r.Baseline, &r.BaselineSamples)
}

// side measures one side of m, the instances of cfg running version: it
// sets *value to the query's value and, when m has a Samples query,
// *samples to that one's.
func (p *Prometheus) side(ctx context.Context, m cuecast.Metric, cfg cuecast.ConfigPath, version uint64, now time.Time, value, samples *float64) error {
	var err error
	if *value, err = p.value(ctx, m.Expand(m.Query, cfg, version), now); err != nil {
		return err
	}
	if m.Samples != "" {
		if *samples, err = p.value(ctx, m.Expand(m.Samples, cfg, version), now); err != nil {
			return err
		}
	}
	return nil
}

// value runs an instant query that must return at most one value: NaN
// when it returns none (no data).
func (p *Prometheus) value(ctx context.Context, q string, at time.Time) (float64, error) {
	qctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	res, _, _, err := p.api.Query(qctx, q, at, v1.WithTimeout(p.timeout))
	if err != nil {
		return math.NaN(), fmt.Errorf("query prometheus %q: %w", q, p.timedOut(ctx, qctx, err))
	}
	switch v := res.(type) {
	case *model.Scalar:
		return float64(v.Value), nil
	case model.Vector:
		switch len(v) {
		case 0:
			return math.NaN(), nil
		case 1:
			return float64(v[0].Value), nil
		}
		return math.NaN(), fmt.Errorf("query prometheus %q: %d series, want one value: aggregate it (sum, avg, histogram_quantile)", q, len(v))
	}
	return math.NaN(), fmt.Errorf("query prometheus %q: a %s, want one value", q, res.Type())
}

// points runs q as a range query over the window before at and returns
// every point of every series, NaNs left out.
func (p *Prometheus) points(ctx context.Context, q string, at time.Time, window time.Duration) ([]float64, error) {
	qctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	step := max(window/30, time.Second)
	res, _, _, err := p.api.QueryRange(qctx, q, v1.Range{Start: at.Add(-window), End: at, Step: step}, v1.WithTimeout(p.timeout))
	if err != nil {
		return nil, fmt.Errorf("query prometheus %q: %w", q, p.timedOut(ctx, qctx, err))
	}
	mat, ok := res.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("query prometheus %q: a %s, want a range of values", q, res.Type())
	}
	var out []float64
	for _, s := range mat {
		for _, pt := range s.Values {
			if f := float64(pt.Value); !math.IsNaN(f) {
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// ErrTimeout is wrapped by the error of a query Prometheus did not answer
// within the Timeout (Options): the bound to raise for a slow Prometheus.
var ErrTimeout = errors.New("no answer")

// timedOut names the timeout in err when it is the query's own bound
// (qctx, derived from ctx) that ran out, not the caller's ctx.
func (p *Prometheus) timedOut(ctx, qctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || !errors.Is(qctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w within %s: %w", ErrTimeout, p.timeout, err)
}

// ErrQueryRefused is wrapped by Check's error when Prometheus cannot parse
// a query (rather than cannot be asked).
var ErrQueryRefused = errors.New("query refused")

// RefusedError is Check's error for a query Prometheus cannot parse. It
// wraps ErrQueryRefused.
type RefusedError struct {
	Metric string
	// Field is the metric's field holding the query: "query" or "samples".
	Field string
	// Expanded is the query Prometheus was given, placeholders filled;
	// the line:column in Msg counts in it, not in the policy's source.
	Expanded string
	// Msg is Prometheus's reason.
	Msg string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("metric %q: %s: prometheus cannot parse it (the line:column Prometheus gives is in the expanded query %q): %s",
		e.Metric, e.Field, e.Expanded, e.Msg)
}

func (e *RefusedError) Unwrap() error { return ErrQueryRefused }

// Check has Prometheus parse each of m's queries (placeholders filled for
// version 1 of cfg), without evaluating them: `cuecast check --prometheus`
// reports a query Prometheus cannot parse before any rollout needs it. A
// query refused is a *RefusedError.
func (p *Prometheus) Check(ctx context.Context, m cuecast.Metric, cfg cuecast.ConfigPath) error {
	for _, q := range []struct{ field, text string }{{"query", m.Query}, {"samples", m.Samples}} {
		if q.text == "" {
			continue
		}
		expanded := m.Expand(q.text, cfg, 1)
		qctx, cancel := context.WithTimeout(ctx, p.timeout)
		_, err := p.api.FormatQuery(qctx, expanded)
		err = p.timedOut(ctx, qctx, err)
		cancel()
		var apiErr *v1.Error
		if errors.As(err, &apiErr) && apiErr.Type == v1.ErrBadData {
			return &RefusedError{Metric: m.Name, Field: q.field, Expanded: expanded, Msg: apiErr.Msg}
		}
		if err != nil {
			return fmt.Errorf("metric %q: ask prometheus to parse its %s %q: %w", m.Name, q.field, q.text, err)
		}
	}
	return nil
}
