package distributor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/poll"
)

// hugeReport is what a compromised instance can send on its own subject:
// a report of nearly the server's max_payload (1 MiB), all of it free
// text and labels.
func hugeReport(instance string) cuecast.Report {
	labels := map[string]string{}
	for i := range 200 {
		labels[fmt.Sprintf("k%03d-%s", i, strings.Repeat("k", 500))] = strings.Repeat("v", 500)
	}
	r := cuecast.Report{Instance: instance, Config: cfg, Version: 2, Checksum: strings.Repeat("c", 20_000), Healthy: false,
		Refused: "version 3: pointer: " + strings.Repeat("y", 100_000), Labels: labels, At: time.Now().UTC()}
	b, _ := json.Marshal(r)
	r.LastError = "version 2: validation hook: " + strings.Repeat("x", 1<<20-len(b)-2048)
	return r
}

// TestDecodeReportBoundsWhatAnInstanceSays: whatever one instance writes,
// the report read from it is small: its texts cut to MaxReportText with a
// marker, keeping the class of its error; its labels at most MaxLabels,
// each cut.
func TestDecodeReportBoundsWhatAnInstanceSays(t *testing.T) {
	t.Parallel()
	big := hugeReport("evil")
	big.LastError = "version 2: validation hook: " + strings.Repeat("é", 300_000) // cut inside no rune
	data, err := json.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	r, err := distributor.DecodeReport(cuecast.ReportSubject(cfg, "evil"), data)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"last_error": r.LastError, "refused": r.Refused, "checksum": r.Checksum} {
		if len(s) > distributor.MaxReportText+len(distributor.Truncated) || !strings.HasSuffix(s, distributor.Truncated) || !utf8.ValidString(s) {
			t.Errorf("%s: %d bytes ending %q, want at most %d+marker, ending with %q, valid UTF-8", name, len(s), s[max(0, len(s)-20):], distributor.MaxReportText, distributor.Truncated)
		}
	}
	if got := distributor.ErrorClass(r.LastError); got != "v2" {
		t.Errorf("error class of the cut last_error = %q, want v2", got)
	}
	if len(r.Labels) > distributor.MaxLabels {
		t.Errorf("%d labels, want at most %d", len(r.Labels), distributor.MaxLabels)
	}
	for k, v := range r.Labels {
		if len(k) > distributor.MaxLabelText+len(distributor.Truncated) || len(v) > distributor.MaxLabelText+len(distributor.Truncated) {
			t.Errorf("label %d bytes = %d bytes, want each at most %d+marker", len(k), len(v), distributor.MaxLabelText)
		}
	}
	out, _ := json.Marshal(r)
	if len(out) > 32<<10 {
		t.Errorf("decoded report is %d bytes, want at most 32 KiB", len(out))
	}

	// An honest report is read as it was sent.
	honest := fleetReports("web", 1)[0]
	honest.Checksum = cuecast.Checksum([]byte("x"))
	data, _ = json.Marshal(honest)
	if r, err := distributor.DecodeReport(cuecast.ReportSubject(cfg, honest.Instance), data); err != nil || r.LastError != honest.LastError ||
		r.Checksum != honest.Checksum || r.Labels["zone"] != honest.Labels["zone"] {
		t.Errorf("honest report read as %+v, %v; want it as sent %+v", r, err, honest)
	}
}

// TestEncodeSummaryFits: a summary too big for a message loses samples,
// never counts: what it says of each group and how many it counts is
// what the whole summary says, and it decodes.
func TestEncodeSummaryFits(t *testing.T) {
	t.Parallel()
	var rs []cuecast.Report
	for i := range 400 {
		// 400 groups (each its own checksum), each with three long errors.
		for j := range 3 {
			rs = append(rs, cuecast.Report{Instance: fmt.Sprintf("web-%d-%d", i, j), Config: cfg, Version: 2,
				Checksum: fmt.Sprintf("sum-%d", i), LastError: fmt.Sprintf("version 2: validation hook: %d %s", j, strings.Repeat("x", 900)),
				Refused: fmt.Sprintf("version 3: pointer: %d %s", j, strings.Repeat("y", 900))})
		}
	}
	sum := distributor.BuildSummary("eu-west", cfg, rs, time.Now())
	full, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 512 << 10
	if len(full) <= limit {
		t.Fatalf("test summary is %d bytes, want it over %d", len(full), limit)
	}
	data, err := distributor.EncodeSummary(sum, limit)
	if err != nil {
		t.Fatalf("EncodeSummary: %v", err)
	}
	if len(data) > limit {
		t.Errorf("encoded summary is %d bytes, want at most %d", len(data), limit)
	}
	got, err := distributor.DecodeSummary(cuecast.SummarySubject("eu-west", cfg), data)
	if err != nil {
		t.Fatalf("DecodeSummary: %v", err)
	}
	if got.Live != sum.Live || len(got.Groups) != len(sum.Groups) {
		t.Fatalf("got %d live in %d groups, want %d in %d", got.Live, len(got.Groups), sum.Live, len(sum.Groups))
	}
	for i, g := range got.Groups {
		w := sum.Groups[i]
		if g.ByBucket != w.ByBucket || g.Error != w.Error || g.Refused != w.Refused || g.Checksum != w.Checksum || g.Instances[0] != w.Instances[0] {
			t.Errorf("group %d: got %+v, want the counts and class of %+v", i, g, w)
		}
	}
	// One that fits goes as it is.
	if data, err := distributor.EncodeSummary(sum, len(full)); err != nil || string(data) != string(full) {
		t.Errorf("EncodeSummary at its own size: %d bytes, %v; want it unchanged (%d bytes)", len(data), err, len(full))
	}
}

// TestOneInstanceCannotSilenceItsRegion: an instance's credential sends,
// on its own subject, a report of nearly a megabyte. Its region's summary
// still fits a message: the hub goes on counting the region's instances,
// none unknown, the attacker's among them with its texts cut.
func TestOneInstanceCannotSilenceItsRegion(t *testing.T) {
	t.Parallel()
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 1, hb)
	startRegion(t, tr.Leaves[0], hb, fleetReports("east", 6))
	poll.Until(t, "the hub counts the region's instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == 6 && st[0].Unknown == 0, fmt.Sprintf("%+v", st[0])
	})
	hub := tr.Hub.Connect(t, natsconf.DistributorUser)
	sums, err := hub.SubscribeSync(cuecast.SummarySubject(tr.Leaves[0].Spec.Name, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Flush(); err != nil {
		t.Fatal(err)
	}

	attack, err := json.Marshal(hugeReport("evil"))
	if err != nil || len(attack) > 1<<20 {
		t.Fatalf("the attack is %d bytes (%v), more than the server's max_payload", len(attack), err)
	}
	// The attacker sends the same bytes once a heartbeat, as an instance
	// reports. Encoded again for each send (reportEvery), the report took
	// up to 1.1 s to encode and send under the race detector at load 11,
	// in the process that runs the region's server and summarizer too:
	// the attacker's own reports then came over 2 s apart, and it was
	// rightly counted gone.
	attacker := tr.Leaves[0].Connect(t, natsconf.ServiceUser("payments"))
	every(t, hb, func() {
		if err := attacker.Publish(cuecast.ReportSubject(cfg, "evil"), attack); err != nil && t.Context().Err() == nil {
			t.Errorf("attack: %v", err)
		}
	})

	// Every summary sent from now on, for more than the loss rule's two
	// heartbeats and the report stream's four, counts all 7.
	counted := 0
	for counted < 2*distributor.LiveHeartbeats*distributor.LostHeartbeats {
		m, err := sums.NextMsg(poll.Patience)
		if err != nil {
			t.Fatalf("waiting for the region's summaries (%d with the attacker so far): %v", counted, err)
		}
		s, err := distributor.DecodeSummary(m.Subject, m.Data)
		if err != nil {
			t.Fatalf("summary: %v", err)
		}
		switch {
		case s.Live == 7:
			counted++
		case counted > 0:
			t.Fatalf("a summary after the attacker's counts %d, want 7", s.Live)
		}
		if int64(len(m.Data)) > hub.MaxPayload()/4 {
			t.Errorf("summary of %d bytes: the attacker's report grew it", len(m.Data))
		}
	}
	st, err := d.Status(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Instances != 7 || st[0].Unknown != 0 {
		t.Errorf("status %+v, want 7 instances, none unknown", st[0])
	}
	det, err := d.Detail(t.Context(), cfg, distributor.DetailRequest{Instances: []string{"evil"}})
	if err != nil || len(det) != 1 {
		t.Fatalf("Detail(evil) = %+v, %v", det, err)
	}
	if e := det[0].LastError; len(e) > distributor.MaxReportText+len(distributor.Truncated) || !strings.HasSuffix(e, distributor.Truncated) {
		t.Errorf("the attacker's last_error is %d bytes, want it cut to %d and marked", len(e), distributor.MaxReportText)
	}
}

// TestDetailAnswersUpToItsLimit: a region of 10,000 instances, each with
// a real checksum and labels, answers a drill-down into all of them: an
// answer of several megabytes, over several messages.
func TestDetailAnswersUpToItsLimit(t *testing.T) {
	t.Parallel()
	// A long heartbeat: 10,000 reports a heartbeat is what the region's
	// server and summarizer take in, under the race detector beside the
	// other tests.
	const hb = 10 * time.Second
	const n = 10_000
	tr, d := regionTree(t, 1, hb)
	rs := fleetReports("east", n)
	for i := range rs {
		rs[i].Checksum = cuecast.Checksum(fmt.Appendf(nil, "content of v%d", rs[i].Version))
		rs[i].Labels["rack"] = fmt.Sprintf("eu-west-1a-rack-%02d", i%8)
		rs[i].Labels["build"] = "2026.12.06-1"
	}
	// The interval at its longest: a summary of 10,000 is built at most
	// once per interval, under the lock the reports' intake takes too.
	startRegion(t, tr.Leaves[0], hb, rs, func(o *distributor.SummarizerOptions) { o.Interval = hb / 4 })
	poll.Until(t, "the hub counts the region's instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == n, fmt.Sprintf("%+v", st[0])
	})
	ctx, cancel := context.WithTimeout(t.Context(), poll.Patience)
	defer cancel()
	det, err := d.Detail(ctx, cfg, distributor.DetailRequest{})
	if err != nil {
		t.Fatalf("Detail: %v (%d reports)", err, len(det))
	}
	if len(det) != n {
		t.Fatalf("Detail = %d reports, want %d", len(det), n)
	}
	seen := map[string]bool{}
	for _, r := range det {
		seen[r.Instance] = true
	}
	for _, r := range rs {
		if !seen[r.Instance] {
			t.Fatalf("Detail lacks %s", r.Instance)
		}
	}
}

// TestDetailParts: an answer goes in parts of at most the limit, numbered
// in order, one answer, every report once; a continued part's more counts
// what the later parts carry, so that an asker that reads only it does
// not take it for the whole; a report too big for any part is counted in
// more.
func TestDetailParts(t *testing.T) {
	t.Parallel()
	rs := fleetReports("web", 1000)
	rs[500].LastError = strings.Repeat("x", 70_000) // alone over a part's room
	const limit = 64 << 10
	parts, err := distributor.DetailParts(distributor.DetailReply{Region: "eu-west", Reports: rs, More: 7}, limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) < 2 {
		t.Fatalf("%d parts, want several", len(parts))
	}
	var got []cuecast.Report
	var answer string
	for i, data := range parts {
		if len(data) > limit {
			t.Errorf("part %d: %d bytes, want at most %d", i, len(data), limit)
		}
		var p distributor.DetailReply
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		if i == 0 {
			answer = p.Answer
		}
		last := i == len(parts)-1
		got = append(got, p.Reports...)
		if p.Part != i || p.Answer != answer || answer == "" || p.Continued == last || p.Region != "eu-west" {
			t.Errorf("part %d: part %d of answer %q (first %q), continued %v, region %q", i, p.Part, p.Answer, answer, p.Continued, p.Region)
		}
		if want := len(rs) - 1 - len(got) + 8; p.More != want {
			t.Errorf("part %d: more %d, want %d (those not sent by it)", i, p.More, want)
		}
	}
	if len(got) != len(rs)-1 {
		t.Errorf("%d reports in the parts, want %d", len(got), len(rs)-1)
	}
}
