package distributor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestASlowReportDoesNotSilenceTheQueue: the region's summarizer takes one
// report in for longer than the loss rule's time (a report of nearly a
// megabyte took 3 s to decode under the race detector on a loaded box,
// and TestOneInstanceCannotSilenceItsRegion then read a summary of 1 of
// its 7 instances). The other instances' reports go on arriving behind
// it, and no summary counts them gone: none counts fewer than the six
// that report, before, while or after, and once the slow report is in,
// the summaries count all seven again.
func TestASlowReportDoesNotSilenceTheQueue(t *testing.T) {
	t.Parallel()
	const hb = 500 * time.Millisecond
	tr, _ := regionTree(t, 1, hb)
	leaf := tr.Leaves[0]
	s := newSummarizer(t, leaf, hb)
	slow := cuecast.ReportSubject(cfg, "slow-0")
	release := make(chan struct{})
	held := make(chan struct{})
	var once sync.Once
	distributor.HoldIntake(s, func(subject string) {
		if subject == slow {
			once.Do(func() { close(held) })
			<-release
		}
	})
	runSummarizer(t, leaf, s)
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before the summarizer's: it may be held

	hub := tr.Hub.Connect(t, natsconf.DistributorUser)
	sums, err := hub.SubscribeSync(cuecast.SummarySubject(leaf.Spec.Name, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Flush(); err != nil {
		t.Fatal(err)
	}
	next := func() distributor.Summary {
		t.Helper()
		m, err := sums.NextMsg(poll.Patience)
		if err != nil {
			t.Fatalf("waiting for the region's summary: %v", err)
		}
		sum, err := distributor.DecodeSummary(m.Subject, m.Data)
		if err != nil {
			t.Fatalf("summary: %v", err)
		}
		return sum
	}
	reportEvery(t, leaf.Connect(t, natsconf.ServiceUser("payments")), hb, fleetReports("east", 6))
	for next().Live != 6 {
	}

	reportEvery(t, leaf.Connect(t, natsconf.ServiceUser("payments")), hb, fleetReports("slow", 1))
	select {
	case <-held:
	case <-time.After(poll.Patience):
		t.Fatal("the slow report never reached the summarizer")
	}
	// Held past the loss rule's time, by two heartbeats more.
	hold := distributor.LiveFor(hb) + 2*hb
	time.AfterFunc(hold, free)
	start := time.Now()
	all := 0
	for all <= distributor.LiveHeartbeats { // for longer than a report lives
		sum := next()
		switch {
		case sum.Live < 6:
			t.Fatalf("a summary %s after the slow report's %s hold began counts %d instances, want the 6 that report throughout", time.Since(start).Round(time.Millisecond), hold, sum.Live)
		case sum.Live == 7:
			all++
		case all > 0:
			t.Fatalf("a summary after the slow report was taken in counts %d, want 7", sum.Live)
		}
	}
}
