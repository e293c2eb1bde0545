package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/termtext"
)

// instanceRow is one instance of `status --instances`: its own report,
// and the region that holds it ("" for one reporting here).
type instanceRow struct {
	Region string `json:"region,omitempty"`
	cuecast.Report
}

// configInstances is `status --instances --output json` for one config.
type configInstances struct {
	Config    cuecast.ConfigPath `json:"config"`
	Instances []instanceRow      `json:"instances"`
	// More counts, by region, the instances a region left out of its
	// answer (its drill-down limit).
	More map[string]int `json:"more,omitempty"`
	// Unanswered are the summarised regions that did not answer.
	Unanswered []string `json:"unanswered,omitempty"`
}

// statusInstances is `cuecast status CONFIG... --instances`: the reports of
// instances that report to this server, and of each summarised region's
// instances, asked of the region (distributor.Distributor.DetailByRegion).
func statusInstances(c *cobra.Command, env *Env, d *distributor.Distributor, opts *StatusOptions) error {
	ctx := c.Context()
	timeout := 5 * time.Second
	if c.Flags().Changed("timeout") {
		timeout = opts.Timeout
	}
	var out []configInstances
	var unanswered []string
	for _, a := range opts.Configs {
		cfgs, err := statusPaths(ctx, d, a)
		if err != nil {
			return err
		}
		for _, cfg := range cfgs {
			// As status without --instances: a config never published is
			// wrong usage, not a config without instances.
			if _, err := d.Latest(ctx, cfg); errors.Is(err, cuecast.ErrNotFound) {
				return &UsageError{Err: fmt.Errorf("status: %s has no versions: %w", cfg, err), Hint: hintPublished}
			} else if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			ci, err := instancesOf(ctx, d, cfg, timeout)
			if err != nil {
				return err
			}
			for _, r := range ci.Unanswered {
				unanswered = append(unanswered, fmt.Sprintf("%s (%s)", r, cfg))
			}
			out = append(out, ci)
		}
	}
	if opts.Output == "json" {
		if err := writeJSON(env.IO.Out, out); err != nil {
			return err
		}
	} else {
		tw := newTable(env.IO.Out)
		tw.row("CONFIG", "INSTANCE", "REGION", "VERSION", "STAGED", "HEALTH", "LAST ERROR")
		for _, ci := range out {
			for _, r := range ci.Instances {
				region, staged, health := r.Region, "-", "healthy"
				if region == "" {
					region = "-"
				}
				if r.Staged != 0 {
					staged = fmt.Sprintf("v%d", r.Staged)
				}
				if !r.Healthy {
					health = "unhealthy"
				}
				tw.row(string(ci.Config), termtext.Line(r.Instance), termtext.Line(region), fmt.Sprintf("v%d", r.Version), staged, health, termtext.Line(oneLine(cmp.Or(r.LastError, r.Refused))))
			}
		}
		tw.flush()
		for _, ci := range out {
			for region, n := range ci.More {
				fmt.Fprintf(env.IO.ErrOut, "%s: region %s left out %d more instances\n", ci.Config, region, n)
			}
		}
	}
	if len(unanswered) > 0 {
		return fmt.Errorf("status --instances: %w: %s", distributor.ErrDetailIncomplete, strings.Join(unanswered, ", "))
	}
	return nil
}

// instancesOf is one config's rows: the instances reporting here, then
// each summarised region's, by region and instance.
func instancesOf(ctx context.Context, d *distributor.Distributor, cfg cuecast.ConfigPath, timeout time.Duration) (configInstances, error) {
	ci := configInstances{Config: cfg, Instances: []instanceRow{}}
	reports, err := d.Reports(ctx, cfg)
	if err != nil {
		return ci, fmt.Errorf("status: %w", err)
	}
	for _, r := range reports {
		if r.Count == 0 { // a summary's group stands for a region's instances: asked below
			ci.Instances = append(ci.Instances, instanceRow{Report: r})
		}
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	regions, err := d.DetailByRegion(dctx, cfg, distributor.DetailRequest{})
	if err != nil && !errors.Is(err, distributor.ErrDetailIncomplete) {
		return ci, fmt.Errorf("status: %w", err)
	}
	for _, rd := range regions {
		if rd.Unanswered {
			ci.Unanswered = append(ci.Unanswered, rd.Region)
			continue
		}
		if rd.More > 0 {
			if ci.More == nil {
				ci.More = map[string]int{}
			}
			ci.More[rd.Region] = rd.More
		}
		for _, r := range rd.Reports {
			ci.Instances = append(ci.Instances, instanceRow{Region: rd.Region, Report: r})
		}
	}
	return ci, nil
}

// oneLine is s up to its first newline: a table row holds one line.
func oneLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
