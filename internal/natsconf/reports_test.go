package natsconf_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
)

// TestStatusBelievesTheSubject: an instance of payments, with exactly what
// it holds (its own .creds from `nats-config user --instance web-1`, or the
// namespace's password), reports on its own subjects bodies that name
// another instance (web-2, failing and unhealthy) and another namespace's
// config (search/ranking, unhealthy). `cuecast status` (the operator's
// distributor, as the CLI opens it) counts neither: the instance and the
// config of a report are those its subject names, and a body that says
// otherwise is dropped.
func TestStatusBelievesTheSubject(t *testing.T) {
	for _, auth := range []string{"password", "creds"} {
		t.Run(auth, func(t *testing.T) {
			st := startSuiteTree(t, auth == "creds")
			node := st.servers[2]
			var nc *nats.Conn
			if auth == "creds" {
				nc = connectInstance(t, st, node, "payments", "web-1")
			} else {
				nc = node.Connect(t, natsconf.ServiceUser("payments"))
			}
			at := time.Now().UTC()
			forged := func(instance string, cfg cuecast.ConfigPath) []byte {
				b, err := json.Marshal(cuecast.Report{Instance: instance, Config: cfg, Version: 1, Healthy: false,
					LastError: "version 1: validation hook: forged", At: at})
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			before := st.reportsLast(t)
			for subj, body := range map[string][]byte{
				cuecast.ReportSubject(checkout, "web-1"):            forged("web-2", checkout),
				cuecast.ReportSubject("payments/x", "web-1"):        forged("web-1", "search/ranking"),
				cuecast.ReportSubject("payments/sentinel", "web-1"): forged("web-1", "payments/sentinel"),
			} {
				if err := nc.Publish(subj, body); err != nil {
					t.Fatal(err)
				}
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			st.waitReports(t, "the reports at the hub", before+3)

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			d, err := distributor.Open(ctx, st.Hub.Connect(t, natsconf.OperatorUser), distributor.Options{})
			if err != nil {
				t.Fatalf("open distributor as operator: %v", err)
			}
			status, err := d.Status(ctx)
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			want := map[cuecast.ConfigPath]distributor.ConfigStatus{
				checkout:         {Instances: 0},
				"search/ranking": {Instances: 1}, // the suite's own healthy report by search's web-1
			}
			for _, s := range status {
				w := want[s.Config]
				if s.Instances != w.Instances || s.Failing != 0 || s.Unhealthy != 0 {
					t.Errorf("status of %s: %d instances, %d failing, %d unhealthy; want %d, none failing or unhealthy",
						s.Config, s.Instances, s.Failing, s.Unhealthy, w.Instances)
				}
			}
			rs, err := d.Reports(ctx, "")
			if err != nil {
				t.Fatalf("reports: %v", err)
			}
			for _, r := range rs {
				if r.Instance == "web-2" || (r.Config == "search/ranking" && !r.Healthy) {
					t.Errorf("report counted from a body its subject contradicts: %+v", r)
				}
			}
			// The honest one among them is read.
			if sentinel, err := d.Reports(ctx, "payments/sentinel"); err != nil || len(sentinel) != 1 {
				t.Errorf("reports of payments/sentinel: %+v, %v; want web-1's own", sentinel, err)
			}
		})
	}
}
