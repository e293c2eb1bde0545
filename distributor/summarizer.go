package distributor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// SummarizerOptions configures a Summarizer.
type SummarizerOptions struct {
	// Region names the summaries (their subject's region token, which the
	// hub binds to the region's link: docs/SECURITY.md). Required; a
	// subject token of [a-z0-9][a-z0-9_-]*, the region's JetStream domain.
	Region string
	// Heartbeat is the instances' report interval (the distributor's): a
	// report is live for LiveHeartbeats of them, and a summary is sent at
	// least once per heartbeat, so the hub can tell a silent region from
	// one at rest. Default 15s.
	Heartbeat time.Duration
	// Interval is the least time between two summaries of one config, sent
	// only when it changed (or a heartbeat passed), but for a completing
	// summary (Summarizer). Default 1s; at most a fourth of Heartbeat.
	Interval time.Duration
	// DetailLimit bounds the reports one drill-down answer carries;
	// default 10,000.
	DetailLimit int
	// Logger receives the summarizer's logs; default discards them.
	Logger *slog.Logger
}

// Summarizer keeps the reports of one region's instances and publishes a
// Summary of each config upstream (docs/PROTOCOL.md §4.5), and answers
// drill-down requests for the reports it holds (DetailRequest). It runs
// on a connection to the region's server, which sees every report of the
// region's instances (the node links carry them up to it), and the
// region's link to the hub carries its summaries, not the reports.
//
// A summary goes out at most once an Interval per config, and only when
// it changed, with one exception: the report that completes a state a
// reader waits for sends its config's summary at once, so that `status
// --wait`, the rollout controller and the dashboard do not wait an
// interval more than with per-instance reports. Those states are every
// live instance on one version, every live instance staging one version
// (strict cutover), and a class of unhealthy or failing instances the
// last summary did not have; each sends at most one summary more per
// version, staged version or class (docs/SCALING.md).
type Summarizer struct {
	nc    *nats.Conn
	o     SummarizerOptions
	start time.Time
	// in queues the reports heard, stamped as they arrive, for one taker
	// (intake); their ages are judged against in.heard.
	in *intake
	// behind says the last tick found the intake a loss rule's time behind
	// (flush), so that it warns once per such spell.
	behind bool
	// takeHook, set by tests only, is called as add starts on a report
	// (HoldIntake).
	takeHook func(subject string)

	mu    sync.Mutex
	byCfg map[cuecast.ConfigPath]*summarized
	// built counts the summaries built (BuildSummary), sent or not.
	built int
}

type summarized struct {
	live *LiveReports
	// last is the last summary sent, without its time; sent when.
	last  []byte
	sent  time.Time
	empty time.Time // since when it has had no live instance

	// What each instance runs as of its last new report, and how many run
	// each version and stage each staged version: enough to see at each
	// report, without building a summary, that it completes a state
	// (prompt). Instances whose reports expired are dropped at the next
	// tick; until then they only delay a completing summary to the tick.
	runs              map[string]running
	onVersion, staged map[uint64]int
	// classes are the unhealthy and failing classes in the last summary
	// sent (promptClass); version and stagedAll the version all its
	// instances ran or staged, 0 if none.
	classes            map[string]bool
	version, stagedAll uint64
	// dropped counts the report messages dropped since the last summary
	// sent, by reason (Summary.Dropped).
	dropped map[string]int
	// changed says a report brought something new since the last summary
	// built, which was of builtLive live instances: with neither that
	// nor an expiry (fewer live) nor a drop, a tick has nothing to build.
	changed   bool
	builtLive int
}

type running struct{ version, staged uint64 }

func newSummarized(cfg cuecast.ConfigPath, ttl time.Duration) *summarized {
	return &summarized{live: NewLiveReports(cfg, ttl), runs: map[string]running{}, onVersion: map[uint64]int{}, staged: map[uint64]int{}, classes: map[string]bool{},
		dropped: map[string]int{}}
}

// count makes inst run r in the tallies.
func (st *summarized) count(inst string, r running) {
	if old, ok := st.runs[inst]; ok {
		st.onVersion[old.version]--
		st.staged[old.staged]--
	}
	st.runs[inst] = r
	st.onVersion[r.version]++
	st.staged[r.staged]++
}

// recount makes the tallies those of the live reports rs, when an
// instance has expired since they were made (every live instance was
// counted when its report came: fewer live than counted means expiry).
func (st *summarized) recount(rs []cuecast.Report) {
	if len(rs) == len(st.runs) {
		return
	}
	clear(st.runs)
	clear(st.onVersion)
	clear(st.staged)
	for _, r := range rs {
		st.count(r.Instance, running{r.Version, r.Staged})
	}
}

// prompt says whether r, just counted, completes a state a reader waits
// for that the last summary sent did not have: every live instance on r's
// version, or staging its staged version, or r in a class of unhealthy or
// failing instances.
func (st *summarized) prompt(r cuecast.Report) bool {
	n := len(st.runs)
	switch {
	case st.onVersion[r.Version] == n && r.Version != st.version:
		return true
	case r.Staged != 0 && st.staged[r.Staged] == n && r.Staged != st.stagedAll:
		return true
	}
	c := promptClass(r.Healthy, ErrorClass(r.LastError), r.Refused != "")
	return c != "" && !st.classes[c]
}

// promptClass is the class of unhealthy or failing instances a report or
// a summary group is in, "" for a healthy one without an error.
func promptClass(healthy bool, errClass string, refused bool) string {
	switch {
	case errClass != "":
		return "error " + errClass
	case refused:
		return "refused"
	case !healthy:
		return "unhealthy"
	}
	return ""
}

// NewSummarizer returns a Summarizer for the region on nc; Run runs it.
func NewSummarizer(nc *nats.Conn, o SummarizerOptions) (*Summarizer, error) {
	if !cuecast.ValidSegment(o.Region) {
		return nil, fmt.Errorf("new summarizer: region %q: want [a-z0-9][a-z0-9_-]*", o.Region)
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	// A summary at rest is sent again once a heartbeat has passed, checked
	// every interval: at most 1¼ heartbeats apart, well within the hub's
	// loss rule (LostHeartbeats).
	o.Interval = min(o.Interval, o.Heartbeat/4)
	if o.DetailLimit <= 0 {
		o.DetailLimit = DefaultDetailLimit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Summarizer{nc: nc, o: o, in: newIntake(), byCfg: map[cuecast.ConfigPath]*summarized{}}, nil
}

// Run subscribes to the region's reports and to drill-down requests, and
// sends summaries until ctx is cancelled.
//
// For its first heartbeat and a quarter it sends nothing, neither
// summaries nor drill-down answers: it has not yet heard every live
// instance (each reports once a heartbeat), and a partial summary or
// answer would tell the hub that instances left. Meanwhile the hub counts
// the region's previous summary, unknown once overdue (LostHeartbeats),
// and a drill-down finds the region unanswered.
func (s *Summarizer) Run(ctx context.Context) error {
	s.start = time.Now()
	var taker sync.WaitGroup
	taker.Go(func() {
		for {
			a, ok := s.in.next()
			if !ok {
				return
			}
			s.add(a.subject, a.data, a.at)
		}
	})
	defer func() {
		s.in.close()
		taker.Wait()
	}()
	reports, err := s.nc.Subscribe(cuecast.ReportPrefix+".>", func(m *nats.Msg) {
		s.in.put(m.Subject, m.Data, time.Now())
	})
	if err != nil {
		return fmt.Errorf("summarizer %s: subscribe to reports: %w", s.o.Region, err)
	}
	defer func() { _ = reports.Unsubscribe() }()
	detail, err := s.nc.Subscribe(cuecast.DetailPrefix+".>", s.answer)
	if err != nil {
		return fmt.Errorf("summarizer %s: subscribe to drill-down requests: %w", s.o.Region, err)
	}
	defer func() { _ = detail.Unsubscribe() }()
	if err := s.nc.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("summarizer %s: subscribe: %w", s.o.Region, err)
	}
	s.o.Logger.Info("summarizing reports", "region", s.o.Region, "heartbeat", s.o.Heartbeat, "interval", s.o.Interval)
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			if !s.warm(now) {
				continue
			}
			s.flush(now)
		}
	}
}

// add takes in the report data that arrived at now on subject.
func (s *Summarizer) add(subject string, data []byte, now time.Time) {
	if s.takeHook != nil {
		s.takeHook(subject)
	}
	cfg, inst, ok := cuecast.ParseReportSubject(subject)
	if !ok {
		return
	}
	s.mu.Lock()
	st := s.byCfg[cfg]
	if st == nil {
		// Checked once, not at every report: a config kept is valid.
		if cfg.Validate() != nil {
			s.mu.Unlock()
			return
		}
		st = newSummarized(cfg, LiveFor(s.o.Heartbeat))
		s.byCfg[cfg] = st
	}
	s.mu.Unlock()
	r, ok, err := st.live.add(inst, data, now)
	if err != nil {
		// Counted up in the next summary, so that the hub counts it as it
		// counts a report it drops itself (cuecast_reports_dropped_total).
		reason := DropMalformed
		if re := (*ReportError)(nil); errors.As(err, &re) {
			reason = re.Reason
		}
		s.mu.Lock()
		st.dropped[reason]++
		s.mu.Unlock()
		s.o.Logger.Debug("dropping report", "subject", subject, "err", err)
		return
	}
	if !ok {
		return // a heartbeat: nothing changed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byCfg[cfg] != st {
		return // forgotten meanwhile
	}
	st.changed = true // after live.add: a tick that clears it has built with r
	st.count(inst, running{r.Version, r.Staged})
	// Every report that arrived before r has been taken in, and none
	// after: r's arrival is the time its summary is true at, however far
	// behind the taker is.
	if s.warm(now) && st.prompt(r) {
		s.send(cfg, st, st.live.Live(now), now)
	}
}

// lagging says whether the reports taken in up to heard are a loss
// rule's time (LiveFor) behind now: too old to summarise the region by.
func (s *Summarizer) lagging(heard, now time.Time) bool {
	return now.Sub(heard) > LiveFor(s.o.Heartbeat)
}

// warm says whether the summarizer has heard every live instance by now
// (Run).
func (s *Summarizer) warm(now time.Time) bool { return now.Sub(s.start) >= s.o.Heartbeat*5/4 }

// flush, at each tick, sends the summary of each config that changed
// since it was last sent, or was last sent a heartbeat ago; not one sent
// less than half an interval ago (a completing summary between two ticks),
// so that a summary goes at most once an interval but for those. A config
// with no live instance is summarised (empty) for as long as a report
// lives, then forgotten.
func (s *Summarizer) flush(now time.Time) {
	heard := s.in.heard(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lagging(heard, now) {
		// A summary now would count as gone the instances whose reports
		// wait in the queue, or as live those whose have stopped: the
		// hub is better told nothing, and counts the region's instances
		// unknown once its summary is overdue (LostHeartbeats).
		if !s.behind {
			s.o.Logger.Warn("report intake behind; summaries held until it catches up", "region", s.o.Region, "behind", now.Sub(heard))
		}
		s.behind = true
		return
	}
	s.behind = false
	for cfg, st := range s.byCfg {
		n := st.live.expire(heard)
		switch {
		case n > 0:
			st.empty = time.Time{}
		case st.empty.IsZero():
			st.empty = now
		case now.Sub(st.empty) > LiveFor(s.o.Heartbeat):
			delete(s.byCfg, cfg)
			continue
		}
		var rs []cuecast.Report
		if n != len(st.runs) { // an instance expired: the tallies drop it
			rs = st.live.Live(heard)
			st.recount(rs)
		}
		if now.Sub(st.sent) < s.o.Interval/2 {
			continue
		}
		// At rest every instance's heartbeat repeats its last report, and
		// building a summary of 25,000 of them each interval to find it
		// equal to the last was most of a region's summarizer's CPU
		// (TestSummarizerAtRestBuildsOnceAHeartbeat).
		if !st.changed && n == st.builtLive && len(st.dropped) == 0 && !s.resendDue(st, now) {
			continue
		}
		if rs == nil {
			rs = st.live.Live(heard)
		}
		s.send(cfg, st, rs, now)
	}
}

// send sends the summary of cfg's live reports rs at now, unless it
// repeats the last one sent less than a heartbeat ago (the tick due a
// heartbeat after it counts as a heartbeat). s.mu is held.
func (s *Summarizer) send(cfg cuecast.ConfigPath, st *summarized, rs []cuecast.Report, now time.Time) {
	sum := BuildSummary(s.o.Region, cfg, rs, now.UTC())
	s.built++
	if len(st.dropped) > 0 {
		sum.Dropped = maps.Clone(st.dropped)
	}
	// Thinned to fit a message: a summary that cannot be sent stands for
	// none, and the hub would soon count the region's instances unknown,
	// then gone (TestOneInstanceCannotSilenceItsRegion).
	data, err := EncodeSummary(sum, maxPayload(s.nc))
	if err != nil {
		s.o.Logger.Error("encode summary", "config", cfg, "err", err)
		return
	}
	raw := withoutTime(data)
	if bytes.Equal(raw, st.last) && !s.resendDue(st, now) && len(sum.Dropped) == 0 {
		st.changed, st.builtLive = false, len(rs)
		return
	}
	if err := s.nc.Publish(cuecast.SummarySubject(s.o.Region, cfg), data); err != nil {
		s.o.Logger.Warn("send summary", "config", cfg, "err", err)
		return // its drops go with the next
	}
	st.changed, st.builtLive = false, len(rs)
	clear(st.dropped)
	st.last, st.sent = raw, now
	clear(st.classes)
	st.version, st.stagedAll = 0, 0
	for i, g := range sum.Groups {
		if c := promptClass(g.Healthy, g.Error, g.Refused); c != "" {
			st.classes[c] = true
		}
		if i == 0 || g.Version == st.version {
			st.version = g.Version
		} else {
			st.version = 0
		}
		if i == 0 || g.Staged == st.stagedAll {
			st.stagedAll = g.Staged
		} else {
			st.stagedAll = 0
		}
	}
}

// maxPayload is the most one message on nc may carry (the server's
// max_payload); unbounded before the server said.
func maxPayload(nc *nats.Conn) int {
	if n := nc.MaxPayload(); n > 0 {
		return int(n)
	}
	return math.MaxInt
}

// resendDue says whether st's last summary sent is due again at now, as
// the heartbeat at rest: a heartbeat less half an interval after it was
// sent, since ticks come an interval apart give or take the scheduler's
// jitter, and one a hair early would put the resend off by an interval
// (TestSummarizerResendsOnceAHeartbeatAtRest).
func (s *Summarizer) resendDue(st *summarized, now time.Time) bool {
	return now.Sub(st.sent) >= s.o.Heartbeat-s.o.Interval/2
}

// DetailRequest asks every region's summarizer for the reports it holds on
// a config (request on cuecast.DetailSubject): of the named instances, and
// those whose labels match all of Labels or of one of Selectors, or
// (none given) all of them.
//
// Reply is the asker's token: each region answers on
// cuecast.DetailReplySubject(region, Reply), ccsumr.<region>.<token>, whose
// region token its credentials bind (docs/SECURITY.md), never on the
// request's reply subject. A request without one is not answered.
type DetailRequest struct {
	Instances []string            `json:"instances,omitempty"`
	Labels    map[string]string   `json:"labels,omitempty"`
	Selectors []map[string]string `json:"selectors,omitempty"`
	Reply     string              `json:"reply"`
}

// DefaultDetailLimit is a summarizer's DetailLimit unless set, and the
// most reports the hub keeps of one region's answer (DetailByRegion).
const DefaultDetailLimit = 10_000

// DetailReply is one message of a region's answer: the live reports that
// match, sorted by instance, at most the summarizer's DetailLimit (More
// says how many were left out). Region must be the region its subject
// names.
//
// An answer too big for one message (10,000 reports are several
// megabytes, a message at most the server's max_payload, 1 MiB by
// default) goes as several, in order: Part numbers them from 0 and
// Continued is set on every one but the last; all carry the same Answer,
// drawn at random per answer, so that parts of two answers (two
// summarizers of one region) are not mixed. More is, on each, how many
// matching reports it and those before it left out: on a continued part
// also those the later parts carry, so that an asker that reads only
// one message (a build before parts) takes it for truncated, never for
// the whole.
type DetailReply struct {
	Region    string           `json:"region"`
	Reports   []cuecast.Report `json:"reports"`
	More      int              `json:"more,omitempty"`
	Answer    string           `json:"answer,omitempty"`
	Part      int              `json:"part,omitempty"`
	Continued bool             `json:"continued,omitempty"`
}

func (s *Summarizer) answer(m *nats.Msg) {
	// Not warm, it has not heard every live instance (Run): an answer
	// would leave out those it has not heard yet, and the asker take them
	// for gone. Unanswered, the region is counted as not answering.
	if !s.warm(time.Now()) {
		return
	}
	rest, ok := strings.CutPrefix(m.Subject, cuecast.DetailPrefix+".")
	if !ok {
		return
	}
	ns, name, ok := strings.Cut(rest, ".")
	if !ok {
		return
	}
	cfg := cuecast.ConfigPath(ns + "/" + strings.ReplaceAll(name, ".", "/"))
	var req DetailRequest
	if json.Unmarshal(m.Data, &req) != nil || !cuecast.ValidSegment(req.Reply) {
		// The answer goes only to the region's own reply subject
		// (ccsumr.<region>.<token>), the one its credential may publish.
		return
	}
	s.mu.Lock()
	st := s.byCfg[cfg]
	s.mu.Unlock()
	reply := DetailReply{Region: s.o.Region, Reports: []cuecast.Report{}}
	if st != nil {
		for _, r := range st.live.Live(s.in.heard(time.Now())) {
			if !req.matches(r) {
				continue
			}
			if len(reply.Reports) == s.o.DetailLimit {
				reply.More++
				continue
			}
			reply.Reports = append(reply.Reports, r)
		}
	}
	slices.SortFunc(reply.Reports, func(a, b cuecast.Report) int { return strings.Compare(a.Instance, b.Instance) })
	parts, err := detailParts(reply, maxPayload(s.nc))
	for i := 0; err == nil && i < len(parts); i++ {
		err = s.nc.Publish(cuecast.DetailReplySubject(s.o.Region, req.Reply), parts[i])
	}
	if err != nil {
		s.o.Logger.Warn("answer drill-down request", "config", cfg, "err", err)
	}
}

// detailParts encodes reply as the messages of one answer (DetailReply),
// each at most limit bytes. A report that alone is over a message's room
// cannot be sent: it is counted in More, as those past the DetailLimit.
func detailParts(reply DetailReply, limit int) ([][]byte, error) {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("encode drill-down answer: %w", err)
	}
	reply.Answer = hex.EncodeToString(id)
	// What a part costs besides its reports, at its largest.
	envelope, err := json.Marshal(DetailReply{Region: reply.Region, Reports: []cuecast.Report{}, More: math.MaxInt, Answer: reply.Answer, Part: math.MaxInt, Continued: true})
	if err != nil {
		return nil, fmt.Errorf("encode drill-down answer: %w", err)
	}
	room := limit - len(envelope)
	var chunks [][]cuecast.Report
	var chunk []cuecast.Report
	size := 0
	more := reply.More
	for _, r := range reply.Reports {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode drill-down answer: %w", err)
		}
		n := len(b) + 1 // and a comma
		if n > room {
			more++
			continue
		}
		if size+n > room {
			chunks, chunk, size = append(chunks, chunk), nil, 0
		}
		chunk, size = append(chunk, r), size+n
	}
	chunks = append(chunks, chunk)
	later := 0
	for _, c := range chunks {
		later += len(c)
	}
	parts := make([][]byte, len(chunks))
	for i, c := range chunks {
		later -= len(c)
		part := DetailReply{Region: reply.Region, Reports: c, More: more + later, Answer: reply.Answer, Part: i, Continued: i < len(chunks)-1}
		if part.Reports == nil {
			part.Reports = []cuecast.Report{}
		}
		if parts[i], err = json.Marshal(part); err != nil {
			return nil, fmt.Errorf("encode drill-down answer: %w", err)
		}
	}
	return parts, nil
}

func (q DetailRequest) matches(r cuecast.Report) bool {
	if len(q.Instances) == 0 && len(q.Labels) == 0 && len(q.Selectors) == 0 {
		return true
	}
	if slices.Contains(q.Instances, r.Instance) {
		return true
	}
	for _, sel := range append([]map[string]string{q.Labels}, q.Selectors...) {
		if len(sel) > 0 && LabelsMatch(r.Labels, sel) {
			return true
		}
	}
	return false
}

// LabelsMatch reports whether labels have every label of want: the rule of
// a rollout stage's label selector (docs/ROLLOUT.md), and of drill-downs.
func LabelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// Split takes the instances in detail out of the summary groups in
// reports (cuecast.Report.Count) and adds them one by one: each leaves a
// group of its own region (cuecast.Report.Region) in its bucket, the one
// alike in what it runs when there is one (the detail and the summary
// were read at different moments). The rollout controller splits out the
// instances a stage names or selects by label, whose cohort membership
// goes by name, not bucket.
//
// A region speaks only for the instances its own summary counts: a
// report of detail that names no region, or whose region has no group in
// its bucket, is left out, as is a region's second report of one
// instance; no region's report takes an instance out of another region's
// group. An instance that two regions both report (or one region and the
// instance itself, at this level) is kept once per claim, each out of
// its own region's group: the reader judges the claims (the rollout
// controller by the worst of them, rollout.DrillDown).
func Split(reports, detail []cuecast.Report) []cuecast.Report {
	out := slices.Clone(reports)
	type claim struct{ region, instance string }
	have := map[claim]bool{}
	for _, r := range out {
		if r.Count == 0 {
			have[claim{r.Region, r.Instance}] = true
		}
	}
	for _, d := range detail {
		c := claim{d.Region, d.Instance}
		if have[c] || d.Count != 0 || d.Region == "" {
			continue
		}
		bucket := cuecast.Cohort(d.Config.Namespace(), d.Instance)
		best := -1
		for i, r := range out {
			if r.Count == 0 || r.Region != d.Region || r.Cohort != bucket {
				continue
			}
			if best < 0 || (r.Version == d.Version && r.Staged == d.Staged && r.Healthy == d.Healthy) {
				best = i
			}
		}
		if best < 0 {
			continue // its region's summary counts nobody there to speak for
		}
		have[c] = true
		out[best].Count--
		if out[best].Count == 0 {
			out = slices.Delete(out, best, best+1)
		}
		out = append(out, d)
	}
	return out
}

// ErrDetailIncomplete is wrapped by Detail's error when a region that
// summarises the config did not answer: the reports returned lack its
// instances.
var ErrDetailIncomplete = errors.New("not every region answered")

// ErrDetailTruncated is wrapped by Detail's error when a region's answer
// left instances out past its DetailLimit: the reports returned are not
// all that match, so a caller that counts or judges them must not take
// them for the whole (the rollout controller waits; check --fleet says so).
var ErrDetailTruncated = errors.New("a region left instances out of its answer")

// Detail fetches from the regions that summarise cfg the reports they
// hold that match req (the per-instance view of a summarised fleet): it
// asks them all at once and waits for an answer from each region with a
// summary of cfg in the report stream, or until ctx is done. Reports
// sent by instances straight to this level (a single server) are not
// asked for: Reports has them. The error wraps ErrDetailIncomplete, with
// the reports that did arrive, when some region did not answer, and
// ErrDetailTruncated, with those it did send, when a region left some out
// past its DetailLimit.
//
// Each region answers on ccsumr.<region>.<token> (req.Reply is set to a
// fresh token), a subject only that region's credentials may publish: an
// answer whose body names another region than its subject, or a region
// not asked, is dropped, so a region cannot answer for another.
func (d *Distributor) Detail(ctx context.Context, cfg cuecast.ConfigPath, req DetailRequest) ([]cuecast.Report, error) {
	regions, err := d.DetailByRegion(ctx, cfg, req)
	var out []cuecast.Report
	var short []string
	for _, r := range regions {
		out = append(out, r.Reports...)
		if r.More > 0 {
			short = append(short, fmt.Sprintf("%s (%d more than the %d it sent)", r.Region, r.More, len(r.Reports)))
		}
	}
	slices.SortFunc(out, func(a, b cuecast.Report) int { return strings.Compare(a.Instance, b.Instance) })
	if err == nil && len(short) > 0 {
		err = fmt.Errorf("drill down into %s: %w: %s", cfg, ErrDetailTruncated, strings.Join(short, ", "))
	}
	return out, err
}

// RegionDetail is one region's answer to a drill-down, as Detail believes
// it: Reports sorted by instance, More left out by the region's limit;
// Unanswered when the region, asked, did not answer in time.
type RegionDetail struct {
	Region     string           `json:"region"`
	Reports    []cuecast.Report `json:"reports"`
	More       int              `json:"more,omitempty"`
	Unanswered bool             `json:"unanswered,omitempty"`
}

// DetailByRegion is Detail by region, sorted by region: the per-instance
// view of `cuecast status --instances`. Its errors are Detail's; with
// ErrDetailIncomplete it returns every region asked, those that did not
// answer marked Unanswered.
func (d *Distributor) DetailByRegion(ctx context.Context, cfg cuecast.ConfigPath, req DetailRequest) ([]RegionDetail, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("drill down: %w", err)
	}
	want := map[string]bool{}
	err := d.reportsRd.Each(ctx, cuecast.SummaryWildcard(cfg), func(m *jetstream.RawStreamMsg) error {
		if _, region, ok := cuecast.ParseSummarySubject(m.Subject); ok {
			want[region] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("drill down into %s: list regions: %w", cfg, err)
	}
	if len(want) == 0 {
		return nil, nil
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("drill down into %s: %w", cfg, err)
	}
	req.Reply = hex.EncodeToString(token)
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("drill down into %s: %w", cfg, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	// Room for every part of every answer (DetailReply) the loop below has
	// not taken yet: a part that finds the channel full is dropped, and
	// its region's answer with it. 10,000 reports of the bounded size
	// (MaxReportText, MaxLabels) fill at most ~130 messages of 1 MiB.
	replies := make(chan *nats.Msg, 256*len(want))
	sub, err := d.nc.ChanSubscribe(cuecast.DetailReplySubject("*", req.Reply), replies)
	if err != nil {
		return nil, fmt.Errorf("drill down into %s: subscribe: %w", cfg, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The answers' interest must reach the regions before the request does.
	if err := d.nc.FlushWithContext(ctx); err != nil {
		return nil, fmt.Errorf("drill down into %s: subscribe: %w", cfg, err)
	}
	if err := d.nc.Publish(cuecast.DetailSubject(cfg), body); err != nil {
		return nil, fmt.Errorf("drill down into %s: %w", cfg, err)
	}
	var out []RegionDetail
	collecting := map[string]*partialDetail{}
	byRegion := func(a, b RegionDetail) int { return strings.Compare(a.Region, b.Region) }
	for len(want) > 0 {
		select {
		case <-ctx.Done():
			missing := slices.Sorted(maps.Keys(want))
			for _, region := range missing {
				out = append(out, RegionDetail{Region: region, Reports: []cuecast.Report{}, Unanswered: true})
			}
			slices.SortFunc(out, byRegion)
			return out, fmt.Errorf("drill down into %s: %w: %s", cfg, ErrDetailIncomplete, strings.Join(missing, ", "))
		case m := <-replies:
			// The subject's region is the one the credentials bind; the
			// body must name the same, and one asked that has not answered.
			region, _, _ := cuecast.ParseDetailReplySubject(m.Subject)
			var r DetailReply
			if json.Unmarshal(m.Data, &r) != nil || r.Region != region {
				d.log.Warn("drill-down answer dropped: its body names another region than its subject", "config", cfg, "subject", m.Subject, "region", r.Region)
				continue
			}
			if !want[region] {
				continue // not asked, or answered already (a second summarizer)
			}
			p := collecting[region]
			switch {
			case p == nil && r.Part == 0:
				p = &partialDetail{answer: r.Answer, rd: RegionDetail{Region: region, Reports: []cuecast.Report{}}}
				collecting[region] = p
			case p == nil || r.Answer != p.answer:
				continue // a part of an answer not being collected (a second summarizer's)
			case r.Part != p.next:
				// A part was lost (core NATS delivers at most once): the
				// answer is incomplete, and the region unanswered unless
				// another answer comes whole.
				delete(collecting, region)
				continue
			}
			p.next++
			rd := &p.rd
			for _, rep := range r.Reports {
				// The region speaks for its own instances only as far as
				// the report's own rule goes: one instance, this config.
				if rep.Config != cfg || rep.Count != 0 || cuecast.ValidateInstance(rep.Instance) != nil {
					continue
				}
				// A region's host answers however it likes: what the hub
				// keeps of it is bounded as a report read from an
				// instance is, and so is how many.
				if len(rd.Reports) == DefaultDetailLimit {
					p.over++
					continue
				}
				bound(cfg, &rep)
				rep.Region = region
				rd.Reports = append(rd.Reports, rep)
			}
			if r.Continued {
				continue
			}
			delete(want, region)
			rd.More = max(r.More, 0) + p.over
			slices.SortFunc(rd.Reports, func(a, b cuecast.Report) int { return strings.Compare(a.Instance, b.Instance) })
			out = append(out, *rd)
		}
	}
	slices.SortFunc(out, byRegion)
	return out, nil
}

// partialDetail is a region's answer to a drill-down being collected: the
// parts of answer up to next (DetailReply).
type partialDetail struct {
	answer string
	next   int
	over   int // reports past DefaultDetailLimit, counted in More
	rd     RegionDetail
}
