package cli

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// SummarizeOptions are the flags of `cuecast summarize`.
type SummarizeOptions struct {
	NATS      string
	Region    string
	Heartbeat time.Duration
	Interval  time.Duration
	Conn      ConnFlags
}

func newSummarizeCmd(env *Env, runF func(*cobra.Command, *SummarizeOptions) error) *cobra.Command {
	opts := &SummarizeOptions{}
	cmd := &cobra.Command{
		Use:   "summarize --nats URL --region NAME",
		Short: "Summarise a region's reports for the hub (a tree's regional server)",
		Long: `summarize runs next to a summarising region's server (nats-config leaf, which
summarises by default, or node --region NAME; docs/SCALING.md): it keeps the reports of the region's instances,
sends the hub one summary per config at most once per --interval when it changed and
at least once per --heartbeat (at once, once, when a report completes a version: every
live instance on it or staging it, or brings a new unhealthy or failing class), and
answers the hub's drill-down requests for the instances' own reports, each answer on
the region's own subject. --heartbeat must be serve's and the instances'. It logs in as
summarizer-<region>, which nats-config writes beside the other credentials and which may
speak only for its region.

Run one per region (more are harmless: they send the same summaries). While none
runs, the hub counts the region's instances as unknown for two heartbeats after its
last summary, then not at all.`,
		Example: `  cuecast summarize --nats tls://eu-west-a:4222 --user summarizer-eu-west \
      --password-file /etc/cuecast/nats/summarizer-eu-west.password --tls-ca ca.pem --region eu-west
  cuecast summarize --nats tls://eu-west-a:4222 --creds /etc/cuecast/nats/summarizer-eu-west.creds \
      --tls-ca ca.pem --region eu-west`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c, opts)
			}
			if err := opts.check(); err != nil {
				return err
			}
			nc, err := dial(env, opts.NATS, "cuecast summarize "+opts.Region, &opts.Conn)
			if err != nil {
				return fmt.Errorf("summarize: %w", err)
			}
			defer nc.Close()
			return summarize(c, env, nc, opts)
		},
	}
	cmd.Flags().StringVar(&opts.NATS, "nats", defaultNATSURL(env), "the region's NATS server URL")
	cmd.Flags().StringVar(&opts.Region, "region", "", "the region's name, as nats-config --region gave it (required)")
	cmd.Flags().DurationVar(&opts.Heartbeat, "heartbeat", 15*time.Second, "the instances' report interval (serve's --heartbeat)")
	cmd.Flags().DurationVar(&opts.Interval, "interval", time.Second, "least time between two summaries of one config")
	opts.Conn.Register(cmd.Flags())
	return cmd
}

// check refuses, before anything dials, what the summarizer would
// otherwise run on a default of its own or fail on later as a refused
// publish: it takes a heartbeat of 0 or less as 15s, which the hub and the
// instances do not share.
func (o *SummarizeOptions) check() error {
	switch {
	case o.Region == "":
		return usageErrorf("pass --region, the region's name in nats-config --region", "summarize: missing --region")
	case !cuecast.ValidSegment(o.Region):
		return usageErrorf("use the region's name as nats-config --region gave it (lowercase letters, digits, - and _)", "summarize: %q cannot name a region", o.Region)
	}
	if err := checkHeartbeat(o.Heartbeat); err != nil {
		return err
	}
	return positive("interval", o.Interval, "1s")
}

func summarize(c *cobra.Command, env *Env, nc *nats.Conn, opts *SummarizeOptions) error {
	s, err := distributor.NewSummarizer(nc, distributor.SummarizerOptions{Region: opts.Region, Heartbeat: opts.Heartbeat,
		Interval: opts.Interval, Logger: env.Logger()})
	if err != nil {
		return fmt.Errorf("summarize: %w", err)
	}
	return s.Run(c.Context())
}
