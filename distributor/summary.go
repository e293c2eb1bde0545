package distributor

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
)

// Summaries (docs/PROTOCOL.md §4.5): in a tree, each region's summarizer
// keeps its instances' reports and sends the hub, per config, one summary
// instead of one report per instance. A summary groups the region's live
// instances by everything the fleet's readers count but the cohort bucket
// — version, checksum, staged version, health, last-known-good, labels
// and the class of the last error — and counts each group per bucket,
// with a bounded sample of its instances' names and errors. Readers turn
// each group's bucket into one report standing for its count of
// instances (cuecast.Report.Count), so status, the dashboard, the metrics
// and the rollout controller count a summarised fleet with the same code
// as a fleet of single reports.
//
// A summary's size depends on the classes present, not on the fleet:
// what a group has in common is written once, its counts are a fixed
// vector of every bucket (BucketCounts) and its names a sample. Mid-change
// every bucket of a region holds both versions; written per bucket, with
// a name each, a group grew with how full its buckets were, and the hub's
// bytes per change with the fleet (TestSummarySizeDoesNotDependOnTheFleet).

// SampleSize bounds the instance names, errors and refusals each summary
// group carries: enough to name an example of each class, and the
// summary stays the same size whatever the fleet.
const SampleSize = 3

// LostHeartbeats is the loss rule of summaries: a region's summary not
// renewed for this many heartbeats (the summarizer sends one every
// heartbeat at rest) stands for instances whose state is unknown
// (Unheard) until it expires with the report stream's max age
// (LiveHeartbeats): a rollout waits for them meanwhile, and after that
// they are not live, as an instance that stops reporting is not.
const LostHeartbeats = 2

// Summary is one region's account of its live instances on one config.
type Summary struct {
	Region string             `json:"region"`
	Config cuecast.ConfigPath `json:"config"`
	// Live is the number of live instances; the groups' counts add up to it.
	Live   int            `json:"live"`
	Groups []SummaryGroup `json:"groups,omitempty"`
	// Dropped counts the report messages on the config the region's
	// summarizer dropped since its last summary sent, by reason
	// (DropReasons): what the hub counts of the reports it drops itself
	// (cuecast_reports_dropped_total), so that a forger in a region is
	// seen at the hub. Before At: a summary that carries drops repeats
	// no other.
	Dropped map[string]int `json:"dropped,omitempty"`
	At      time.Time      `json:"at"`
}

// SummaryGroup is the instances of one region alike in everything the
// fleet's readers count but their cohort bucket, which it counts them by.
type SummaryGroup struct {
	Version       uint64 `json:"version"`
	Checksum      string `json:"checksum,omitempty"`
	Staged        uint64 `json:"staged,omitempty"`
	Healthy       bool   `json:"healthy"`
	LastKnownGood bool   `json:"last_known_good,omitempty"`
	// Labels are the instances' labels but for keys left out when the
	// region's instances hold more than MaxLabelSets label sets.
	Labels map[string]string `json:"labels,omitempty"`
	// Error is the class of the instances' last error (ErrorClass).
	Error string `json:"error,omitempty"`
	// Refused says the instances refused a pointer (Report.Refused).
	Refused bool `json:"refused,omitempty"`

	// ByBucket counts the group's instances per cohort bucket: ByBucket[b]
	// of them are in bucket b. Every bucket is written, empty or not, at a
	// fixed width, so a group costs the hub the same bytes whatever the
	// fleet's size and however full its buckets are.
	ByBucket BucketCounts `json:"by_bucket"`
	// Instances is a sample of the group's instances: the SampleSize first
	// by name, sorted. A reader names a bucket's report after the sampled
	// instance in it, if any (Summary.Reports).
	Instances []string `json:"instances"`
	// Errors and Refusals are samples, sorted, at most SampleSize each:
	// distinct texts, the first in the group.
	Errors   []string `json:"errors,omitempty"`
	Refusals []string `json:"refusals,omitempty"`
	// AppliedAt is the latest apply in the group.
	AppliedAt time.Time `json:"applied_at,omitzero"`
}

// Count is the number of instances in the group.
func (g SummaryGroup) Count() int {
	n := 0
	for _, c := range g.ByBucket {
		n += int(c)
	}
	return n
}

// BucketCounts is a count per cohort bucket. On the wire it is the
// counts as big-endian uint32s, in bucket order, in standard base64: 536
// characters for any fleet, where a list of the non-empty buckets (with
// a name each) grew with how full they were, so that the hub's bytes per
// change grew with the fleet up to ~1,250 instances a region and with
// how long a change took to spread (BENCHMARKS.md, Scale, "Both modes").
type BucketCounts [cuecast.Buckets]uint32

// MarshalJSON encodes the counts as one base64 string.
func (c BucketCounts) MarshalJSON() ([]byte, error) {
	raw := make([]byte, 0, 4*len(c))
	for _, n := range c {
		raw = binary.BigEndian.AppendUint32(raw, n)
	}
	return json.Marshal(raw) // []byte: standard base64
}

// UnmarshalJSON decodes what MarshalJSON encodes, and nothing shorter or
// longer.
func (c *BucketCounts) UnmarshalJSON(data []byte) error {
	var raw []byte
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("bucket counts: %w", err)
	}
	if len(raw) != 4*len(c) {
		return fmt.Errorf("bucket counts: %d bytes, want %d", len(raw), 4*len(c))
	}
	for b := range c {
		c[b] = binary.BigEndian.Uint32(raw[4*b:])
	}
	return nil
}

// GroupName is the name a summary's report stands under for a bucket
// of a group none of whose sampled instances is in it: the region, the
// bucket and the group's place in the summary (from 1). It is no
// instance's name (cuecast.ValidateInstance refuses "/"), so it is never
// taken for one, and it is unique in a fleet's reports on a config.
func GroupName(region string, bucket, group int) string {
	return fmt.Sprintf("%s/b%d/g%d", region, bucket, group)
}

// FailedVersion returns the version a last_error says the instance failed
// to apply: one naming a version ("version N: STEP: detail",
// docs/PROTOCOL.md §4.3) at a step other than "pointer" (a refused
// forgery says nothing about the version) and "stage" (a transient
// staging error); ok is false for any other error.
func FailedVersion(lastErr string) (uint64, bool) {
	rest, ok := strings.CutPrefix(lastErr, "version ")
	if !ok {
		return 0, false
	}
	num, rest, ok := strings.Cut(rest, ": ")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, false
	}
	step, _, _ := strings.Cut(rest, ":")
	return n, step != "pointer" && step != "stage"
}

// ErrorClass is what a summary keeps of a last error for counting: "" for
// none, "vN" for a failure to apply version N (FailedVersion), "other"
// for any other. A group's sample error has its class, so the readers'
// rules (FailedVersion, LastError != "") give the same on it as on each
// of the group's instances.
func ErrorClass(lastErr string) string {
	if lastErr == "" {
		return ""
	}
	if n, ok := FailedVersion(lastErr); ok {
		return "v" + strconv.FormatUint(n, 10)
	}
	return "other"
}

type groupKey struct {
	version      uint64
	checksum     string
	staged       uint64
	healthy, lkg bool
	labels       string
	errClass     string
	refused      bool
}

func labelsKey(l map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l)) {
		b.WriteString(strconv.Quote(k))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l[k]))
		b.WriteByte(',')
	}
	return b.String()
}

// MaxLabelSets bounds the distinct label sets a summary groups by. Labels
// of one value per instance (a host name) would make a group per instance
// and the summary grow with the fleet, past what one message may carry;
// beyond the bound the keys with the most distinct values are left out of
// the groups (groupLabels). A drill-down has every instance's labels.
const MaxLabelSets = 32

// groupLabels returns the label keys a summary of reports on cfg leaves out
// of its groups: none while the reports hold at most MaxLabelSets distinct
// label sets; otherwise, one at a time, the key with the most distinct
// values (then the first by name) until they do, but never a dimension of
// cfg's variant, by which drift is judged (DriftOf). With none left out,
// keys are the reports' labelsKey, in order.
func groupLabels(cfg cuecast.ConfigPath, reports []cuecast.Report) (drop map[string]bool, keys []string) {
	sets := func(without map[string]bool) int {
		seen := map[string]bool{}
		for _, r := range reports {
			seen[labelsKey(withoutLabels(r.Labels, without))] = true
			if len(seen) > MaxLabelSets {
				break
			}
		}
		return len(seen)
	}
	seen := map[string]bool{}
	keys = make([]string, len(reports))
	for i, r := range reports {
		keys[i] = labelsKey(r.Labels)
		seen[keys[i]] = true
	}
	if len(seen) <= MaxLabelSets {
		return nil, keys
	}
	values := map[string]map[string]bool{}
	for _, r := range reports {
		for k, v := range r.Labels {
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			values[k][v] = true
		}
	}
	for _, dv := range cfg.Variant() {
		delete(values, dv.Dim)
	}
	drop = map[string]bool{}
	for len(values) > 0 && sets(drop) > MaxLabelSets {
		most := ""
		for _, k := range slices.Sorted(maps.Keys(values)) {
			if most == "" || len(values[k]) > len(values[most]) {
				most = k
			}
		}
		drop[most] = true
		delete(values, most)
	}
	return drop, nil
}

// withoutLabels is l without the keys in drop (l itself when none is in it).
func withoutLabels(l map[string]string, drop map[string]bool) map[string]string {
	if len(drop) == 0 {
		return l
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		if !drop[k] {
			out[k] = v
		}
	}
	return out
}

// BuildSummary summarises reports, the live reports of region's instances
// on cfg, at at. An instance's bucket is computed from its name, not taken
// from its report, as the controller's cohorts compute it.
func BuildSummary(region string, cfg cuecast.ConfigPath, reports []cuecast.Report, at time.Time) Summary {
	ns := cfg.Namespace()
	drop, keys := groupLabels(cfg, reports)
	groups := map[groupKey]*SummaryGroup{}
	for i, r := range reports {
		labels := withoutLabels(r.Labels, drop)
		var lk string
		if keys != nil {
			lk = keys[i]
		} else {
			lk = labelsKey(labels)
		}
		k := groupKey{version: r.Version, checksum: r.Checksum, staged: r.Staged,
			healthy: r.Healthy, lkg: r.LastKnownGood, labels: lk, errClass: ErrorClass(r.LastError), refused: r.Refused != ""}
		g := groups[k]
		if g == nil {
			g = &SummaryGroup{Version: r.Version, Checksum: r.Checksum, Staged: r.Staged, Healthy: r.Healthy,
				LastKnownGood: r.LastKnownGood, Labels: maps.Clone(labels), Error: k.errClass, Refused: k.refused}
			groups[k] = g
		}
		g.ByBucket[cuecast.Cohort(ns, r.Instance)]++
		g.Instances = sample(g.Instances, r.Instance)
		if r.LastError != "" {
			g.Errors = sample(g.Errors, r.LastError)
		}
		if r.Refused != "" {
			g.Refusals = sample(g.Refusals, r.Refused)
		}
		if r.AppliedAt.After(g.AppliedAt) {
			g.AppliedAt = r.AppliedAt
		}
	}
	s := Summary{Region: region, Config: cfg, Live: len(reports), At: at}
	for _, g := range groups {
		s.Groups = append(s.Groups, *g)
	}
	// A name is in one group only: the order is total, and a summary that
	// did not change encodes the same (the summarizer sends it again only
	// once a heartbeat).
	slices.SortFunc(s.Groups, func(a, b SummaryGroup) int { return cmp.Compare(a.Instances[0], b.Instances[0]) })
	return s
}

// sample adds v to the sorted sample s, keeping the SampleSize smallest
// distinct values.
func sample(s []string, v string) []string {
	i, found := slices.BinarySearch(s, v)
	if found || i >= SampleSize {
		return s
	}
	s = slices.Insert(s, i, v)
	if len(s) > SampleSize {
		s = s[:SampleSize]
	}
	return s
}

// Reports turns the summary into one report per group and bucket,
// standing for the group's instances in that bucket and named after the
// group's first sampled instance in the bucket, or else GroupName; sorted
// by bucket and name, each with the summary's Region. With unknown set
// (the region's summary is overdue: LostHeartbeats), each is Unheard: the
// instances are live as far as anyone knows, their state is not.
func (s Summary) Reports(unknown bool) []cuecast.Report {
	var out []cuecast.Report
	ns := s.Config.Namespace()
	for gi, g := range s.Groups {
		named := map[int]string{}
		for _, id := range g.Instances { // sorted: the first in a bucket wins
			if b := cuecast.Cohort(ns, id); named[b] == "" {
				named[b] = id
			}
		}
		for bucket, n := range g.ByBucket {
			if n == 0 {
				continue
			}
			name := named[bucket]
			if name == "" {
				name = GroupName(s.Region, bucket, gi+1)
			}
			r := cuecast.Report{Instance: name, Region: s.Region, Labels: g.Labels, Cohort: bucket, Config: s.Config, Version: g.Version,
				Checksum: g.Checksum, Healthy: g.Healthy, LastKnownGood: g.LastKnownGood, Staged: g.Staged, AppliedAt: g.AppliedAt,
				At: s.At, Count: int(n)}
			if len(g.Errors) > 0 {
				r.LastError = g.Errors[0]
			}
			if len(g.Refusals) > 0 {
				r.Refused = g.Refusals[0]
			}
			if unknown {
				r = cuecast.Report{Instance: r.Instance, Region: r.Region, Labels: r.Labels, Cohort: r.Cohort, Config: r.Config, Healthy: true, At: unheardAt, Count: r.Count}
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b cuecast.Report) int {
		return cmp.Or(cmp.Compare(a.Cohort, b.Cohort), cmp.Compare(a.Instance, b.Instance))
	})
	return out
}

// DecodeSummary is the one rule for reading a summary, as DecodeReport is
// for a report: the summary on subject, ccsum.<region>.<ns>.<name>, whose
// body must name the region and config the subject does, and be
// consistent in itself (every sampled instance in a bucket its group
// counts, counts adding up). The region token is what the hub's permissions bind
// to the region's link (docs/SECURITY.md), so a region can speak only for
// itself. The error is a *ReportError wrapping ErrReportSubject.
func DecodeSummary(subject string, data []byte) (Summary, error) {
	cfg, region, ok := cuecast.ParseSummarySubject(subject)
	if !ok || cfg.Validate() != nil || !cuecast.ValidSegment(region) {
		return Summary{}, &ReportError{Subject: subject, Reason: DropMalformed, Detail: "not a summary subject"}
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return Summary{}, &ReportError{Subject: subject, Reason: DropMalformed, Detail: err.Error()}
	}
	if s.Region != region {
		return Summary{}, &ReportError{Subject: subject, Reason: DropInstance, Detail: fmt.Sprintf("body names region %q", s.Region)}
	}
	if s.Config != cfg {
		return Summary{}, &ReportError{Subject: subject, Reason: DropConfig, Detail: fmt.Sprintf("body names config %q", s.Config)}
	}
	// Its time becomes its reports' (Reports), and one at or before
	// unheardAt would pass them for instances not heard yet, which the
	// rollout controller waits for past any wait and hold: a region's host
	// could stall every rollout for as long as it sent it (an instance's
	// own report is stamped with its arrival instead: stamp).
	if !s.At.After(unheardAt) {
		return Summary{}, &ReportError{Subject: subject, Reason: DropMalformed, Detail: fmt.Sprintf("at %s is no time a summary is made", s.At.Format(time.RFC3339Nano))}
	}
	total := 0
	for _, g := range s.Groups {
		n := g.Count()
		if n < 1 || len(g.Instances) < 1 || len(g.Instances) > min(n, SampleSize) || len(g.Errors) > SampleSize || len(g.Refusals) > SampleSize {
			return Summary{}, &ReportError{Subject: subject, Reason: DropMalformed, Detail: "a group counts nobody, or its samples disagree with its counts"}
		}
		for i, id := range g.Instances {
			if cuecast.ValidateInstance(id) != nil || (i > 0 && id <= g.Instances[i-1]) {
				return Summary{}, &ReportError{Subject: subject, Reason: DropMalformed, Detail: fmt.Sprintf("sampled instance %q is not a name, or not in order", id)}
			}
			if b := cuecast.Cohort(cfg.Namespace(), id); g.ByBucket[b] == 0 {
				return Summary{}, &ReportError{Subject: subject, Reason: DropMalformed, Detail: fmt.Sprintf("sampled instance %q is in bucket %d, which the group counts nobody in", id, b)}
			}
		}
		total += n
		if (g.Error == "") != (len(g.Errors) == 0) || (len(g.Errors) > 0 && ErrorClass(g.Errors[0]) != g.Error) || g.Refused != (len(g.Refusals) > 0) {
			return Summary{}, &ReportError{Subject: subject, Reason: DropMalformed, Detail: "a group's sample errors are not of its class"}
		}
	}
	for reason, n := range s.Dropped {
		if !slices.Contains(DropReasons(), reason) || n < 1 {
			return Summary{}, &ReportError{Subject: subject, Reason: DropMalformed, Detail: fmt.Sprintf("dropped %d for reason %q", n, reason)}
		}
	}
	if total != s.Live {
		return Summary{}, &ReportError{Subject: subject, Reason: DropMalformed, Detail: fmt.Sprintf("groups count %d instances, live says %d", total, s.Live)}
	}
	return s, nil
}

// Weigh sums the instances reports stand for (cuecast.Report.Weight).
func Weigh(reports []cuecast.Report) int {
	n := 0
	for _, r := range reports {
		n += r.Weight()
	}
	return n
}

// ErrSummaryTooBig is wrapped by EncodeSummary's error: even without
// its samples, the summary is over the limit.
var ErrSummaryTooBig = errors.New("summary too big for a message")

// shortSample bounds, in bytes, a sample error or refusal of a summary
// thinned to fit a message (EncodeSummary): long enough to keep its class
// ("version N: STEP:").
const shortSample = 128

// EncodeSummary encodes s in at most limit bytes (the connection's max
// payload): as it is when it fits; else with one sampled name, error and
// refusal per group; else with those texts cut to shortSample bytes.
// Samples go before counts: every group, its counts and what it has in
// common are always sent, so a region's instances stay counted however
// big its reports' texts. The error wraps ErrSummaryTooBig when even
// that is over the limit (more groups than a message holds).
func EncodeSummary(s Summary, limit int) ([]byte, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode summary of %s: %w", s.Config, err)
	}
	if len(data) <= limit {
		return data, nil
	}
	for _, textLimit := range []int{MaxReportText, shortSample} {
		thin := s
		thin.Groups = make([]SummaryGroup, len(s.Groups))
		for i, g := range s.Groups {
			g.Instances = g.Instances[:1] // a group's sample is never empty
			if len(g.Errors) > 0 {
				// Cut only where the cut keeps the class (DecodeSummary).
				if e := clip(g.Errors[0], textLimit); ErrorClass(e) == g.Error {
					g.Errors = []string{e}
				} else {
					g.Errors = g.Errors[:1]
				}
			}
			if len(g.Refusals) > 0 {
				g.Refusals = []string{clip(g.Refusals[0], textLimit)}
			}
			thin.Groups[i] = g
		}
		if data, err = json.Marshal(thin); err != nil {
			return nil, fmt.Errorf("encode summary of %s: %w", s.Config, err)
		}
		if len(data) <= limit {
			return data, nil
		}
	}
	return nil, fmt.Errorf("encode summary of %s: %d groups in %d bytes without samples, over %d: %w", s.Config, len(s.Groups), len(data), limit, ErrSummaryTooBig)
}
