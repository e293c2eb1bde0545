package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// The drill-down a rollout's stages need on a summarised fleet: the one
// rule of the controller, which judges the stages on it, and of the
// dashboard's config page, which counts them on it.

// Detailer is the distributor's drill-down into the regions that summarise
// a config's reports, region by region (distributor.Distributor.DetailByRegion).
type Detailer interface {
	DetailByRegion(ctx context.Context, cfg cuecast.ConfigPath, req distributor.DetailRequest) ([]distributor.RegionDetail, error)
}

var _ Detailer = (*distributor.Distributor)(nil)

// worstClaims keeps, of the reports that each speak for one instance of
// the same name (two regions that both answered for it, or a region and
// the instance itself), one: the claim whose apply of version target is
// worst (applyRank), unhealthy when any claim says so. A region holds its
// own server and summarizer, so it can report any name; believed as it
// is, its word could make another region's instance look better than
// that region says. Judged on the worst claim, it can only make it look
// worse, which would at most halt or hold the stage, as the region could
// by misstating its own instances. The first of equally bad claims stays
// (regions answer in name order).
//
// The report kept names every claiming region (joined by claimSep), and
// the health gate counts it in each one's part of the cohort (measure):
// counted in one region's part only, the first by name, another region
// that claimed the instance as healthy took it out of its own region's
// part and into its own, where its own instances, as many as it cares
// to claim, diluted it, and a canary that breached its region's part
// passed (TestRegionCannotMaskAnothersNamedCanary).
func worstClaims(reports []cuecast.Report, target uint64) []cuecast.Report {
	out := make([]cuecast.Report, 0, len(reports))
	at := map[string]int{}
	for _, r := range reports {
		if r.Count != 0 {
			out = append(out, r)
			continue
		}
		i, ok := at[r.Instance]
		if !ok {
			at[r.Instance] = len(out)
			out = append(out, r)
			continue
		}
		healthy := out[i].Healthy && r.Healthy
		regions := Claimants(out[i])
		if !slices.Contains(regions, r.Region) {
			regions = append(regions, r.Region)
		}
		if applyRank(r, target) > applyRank(out[i], target) {
			out[i] = r
		}
		out[i].Healthy = healthy
		out[i].Region = strings.Join(regions, claimSep)
	}
	return out
}

// applyRank orders what a report says of the instance's apply of version
// target, from best to worst: applied it, staged it, neither (waited
// for), failed to apply it.
func applyRank(r cuecast.Report, target uint64) int {
	switch {
	case r.Version == target:
		return 0
	case r.Staged == target:
		return 1
	case applyFailure(r.LastError, target):
		return 3
	default:
		return 2
	}
}

// Drill is the reports a rollout's stages are counted on (DrillDown).
type Drill struct {
	// Reports are the reports given, with each instance a region sent
	// split out of that region's summary group (distributor.Split), and
	// an instance more than one region sent judged on the worst claim
	// (worstClaims), its Region naming each of them (Claimants).
	Reports []cuecast.Report
	// Short are the regions whose answer lacks instances asked for: those
	// that did not answer (Unanswered), and those that left More out past
	// their limit. Their missing instances stay in their bucket's group.
	Short []distributor.RegionDetail
}

// NeedsDrillDown reports whether counting r's stages on reports needs
// DrillDown, and with what request: when the reports come from regions'
// summary groups (cuecast.Report.Count) and r's stages name or select
// instances (Rollout.DetailRequest). A summary group is in a stage by its
// bucket (Cohort.Includes), so a named or labelled stage holds none of its
// instances until they are split out of their groups.
func NeedsDrillDown(r *Rollout, reports []cuecast.Report) (distributor.DetailRequest, bool) {
	if r == nil {
		return distributor.DetailRequest{}, false
	}
	grouped := false
	for _, rp := range reports {
		grouped = grouped || rp.Count > 0
	}
	if !grouped {
		return distributor.DetailRequest{}, false
	}
	return r.DetailRequest()
}

// DrillDown returns the reports to count or judge r's stages on: reports
// themselves when NeedsDrillDown says they need none (d is then not
// asked), else
// reports with the instances r names or selects asked of the regions that
// summarise cfg, until ctx is done, and split out of their own region's
// groups; an instance that two regions both answer for stands once, as
// the worse of their claims says (worstClaims).
//
// A region that did not answer, or left instances out past its limit, is
// named in Drill.Short, and the Drill holds what did arrive, split; the
// error then wraps distributor.ErrDetailIncomplete or
// distributor.ErrDetailTruncated. A caller that judges the stages (the
// controller) must take that for a failed read; one that shows them (the
// dashboard) may show the Drill and name the regions. Any other error
// (the regions could not be asked) comes with reports unsplit.
func DrillDown(ctx context.Context, d Detailer, cfg cuecast.ConfigPath, r *Rollout, reports []cuecast.Report) (Drill, error) {
	req, ok := NeedsDrillDown(r, reports)
	if !ok {
		return Drill{Reports: reports}, nil
	}
	regions, err := d.DetailByRegion(ctx, cfg, req)
	if err != nil && !errors.Is(err, distributor.ErrDetailIncomplete) {
		return Drill{Reports: reports}, err
	}
	var dr Drill
	var detail []cuecast.Report
	var truncated []string
	for _, rd := range regions {
		for _, rep := range rd.Reports {
			rep.Region = rd.Region // the answer speaks for its own region only
			detail = append(detail, rep)
		}
		if rd.Unanswered || rd.More > 0 {
			dr.Short = append(dr.Short, rd)
		}
		if rd.More > 0 {
			truncated = append(truncated, fmt.Sprintf("%s (%d more than the %d it sent)", rd.Region, rd.More, len(rd.Reports)))
		}
	}
	dr.Reports = worstClaims(distributor.Split(reports, detail), r.Version)
	if err == nil && len(truncated) > 0 {
		err = fmt.Errorf("drill down into %s: %w: %s", cfg, distributor.ErrDetailTruncated, strings.Join(truncated, ", "))
	}
	return dr, err
}
