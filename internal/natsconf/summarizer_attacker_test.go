package natsconf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestRegionCredentialCannotSpeakForAnotherRegion plays a leaked
// summarizer credential (natsconf.SummarizerUser("leaf-1")), with
// passwords and with .creds files. What it is for works: it summarises its
// region's reports for the hub and answers the operator's drill-down. What
// it is not for is refused by the region's own server: another region's
// summary or drill-down answer, a version or pointer (cc.>), an instance's
// report, and the hub stores none of them.
func TestRegionCredentialCannotSpeakForAnotherRegion(t *testing.T) {
	for _, mode := range []string{"password", "creds"} {
		t.Run(mode, func(t *testing.T) {
			testSummarizerCredential(t, natstest.StartTree(t, natstest.TreeOptions{Leaves: 2, Namespaces: []string{"payments"}, Regions: true, JWT: mode == "creds"}))
		})
	}
}

func testSummarizerCredential(t *testing.T, tr *natstest.Tree) {
	const cfg = cuecast.ConfigPath("payments/checkout")
	const hb = 500 * time.Millisecond
	d, err := distributor.New(t.Context(), tr.Hub.Connect(t, natsconf.DistributorUser), distributor.Options{Heartbeat: hb})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(t.Context(), cuecast.Version{Config: cfg, Version: 1, Commit: "c1"}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	region := tr.Leaves[0]
	errs := make(asyncErrs, 16)
	nc := region.Connect(t, natsconf.SummarizerUser("leaf-1"), errs.option())

	// Its job: the region's summaries, from its instances' reports.
	s, err := distributor.NewSummarizer(nc, distributor.SummarizerOptions{Region: "leaf-1", Heartbeat: hb})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	svc := region.Connect(t, natsconf.ServiceUser("payments"))
	report := func() {
		for i := range 3 {
			b, _ := json.Marshal(cuecast.Report{Instance: fmt.Sprintf("web-%d", i), Config: cfg, Version: 1, Healthy: true, At: time.Now().UTC()})
			if err := svc.Publish(cuecast.ReportSubject(cfg, fmt.Sprintf("web-%d", i)), b); err != nil {
				t.Error(err)
			}
		}
	}
	op, err := distributor.Open(t.Context(), tr.Hub.Connect(t, natsconf.OperatorUser), distributor.Options{Heartbeat: hb})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the operator counts region 1's instances from its summaries", poll.Patience, func() (bool, string) {
		report()
		st, err := op.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == 3 && st[0].Unknown == 0, fmt.Sprintf("%+v", st[0])
	})
	// The operator drills down through it to the instances' own reports.
	det, err := op.Detail(t.Context(), cfg, distributor.DetailRequest{})
	if err != nil || len(det) != 3 {
		t.Fatalf("the operator's drill-down: %d reports, %v; want region 1's 3", len(det), err)
	}

	// What it may not do: each refused where it is sent, at its region's server.
	js := natstest.JetStream(t, tr.Hub.Connect(t, natsconf.DistributorUser))
	reports, err := js.Stream(t.Context(), cuecast.ReportStream)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := json.Marshal(distributor.BuildSummary("leaf-2", cfg, []cuecast.Report{{Instance: "west-1", Config: cfg, Version: 9}}, time.Now()))
	forgedReport, _ := json.Marshal(cuecast.Report{Instance: "web-0", Config: cfg, Version: 9})
	answers := make(chan *nats.Msg, 4)
	sub, err := tr.Hub.Connect(t, natsconf.DistributorUser).ChanSubscribe(cuecast.DetailReplyPrefix+".>", answers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	for _, a := range []struct{ what, subject string }{
		{"another region's summary", cuecast.SummarySubject("leaf-2", cfg)},
		{"another region's drill-down answer", cuecast.DetailReplySubject("leaf-2", "0123abcd")},
		{"a version", cuecast.VersionSubject(cfg)},
		{"a pointer", cuecast.AllPointerSubject(cfg)},
		{"an instance's report", cuecast.ReportSubject(cfg, "web-0")},
	} {
		body := forged
		if a.what == "an instance's report" {
			body = forgedReport
		}
		if err := nc.Publish(a.subject, body); err != nil {
			t.Fatal(err)
		}
		errs.refused(t, a.what, a.subject)
	}
	// Barrier: its own summary, sent after the attacks on the same
	// connection, reaches the hub; nothing before it was stored.
	poll.Until(t, "region 1's next summary at the hub", poll.Patience, func() (bool, string) {
		m, err := reports.GetLastMsgForSubject(t.Context(), cuecast.SummarySubject("leaf-1", cfg))
		if err != nil {
			return false, err.Error()
		}
		return m.Time.After(time.Now().Add(-hb)), m.Time.String()
	})
	for _, subj := range []string{cuecast.SummarySubject("leaf-2", cfg), cuecast.ReportSubject(cfg, "web-0")} {
		if m, err := reports.GetLastMsgForSubject(t.Context(), subj); err == nil {
			t.Errorf("the hub stored %s: %.120s", subj, m.Data)
		}
	}
	if v, err := d.Latest(t.Context(), cfg); err != nil || v.Version != 1 {
		t.Errorf("latest version %+v, %v; want 1", v, err)
	}
	select {
	case m := <-answers:
		if region, _, _ := cuecast.ParseDetailReplySubject(m.Subject); region != "leaf-1" {
			t.Errorf("the hub heard a drill-down answer on %s", m.Subject)
		}
	default:
	}
}
