package web

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/metrics"
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH             = 1040, 260
	padL, padR, padT, padB     = 46, 250, 14, 30
	plotW, plotH               = chartW - padL - padR, chartH - padT - padB
	legendX, legendY, legendDY = padL + plotW + 14, padT + 10, 18
)

// palette colours the series, oldest to newest, each version its own hue
// so that overlapping lines stay apart; the current version is always
// drawn last in the strongest colour, and thicker.
var palette = []string{"#8c959f", "#bf8700", "#8250df", "#1a7f37", "#1f6feb"}

// chartSVG draws the propagation of recent versions of one config: the share
// of live instances applying each version (y, 0–100%) against the time since
// its compile (x). Each series is a step line: a share holds until the next
// sample. Dots mark where 50% and 100% were first reached. The SVG scales
// to its container's width; every sample is a point whose tooltip gives
// its values (hover), and each version is one line, one legend entry.
func chartSVG(series []metrics.Series) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" preserveAspectRatio="xMinYMin meet" role="img" class="chart" font-family="system-ui, sans-serif" font-size="11">`,
		chartW, chartH)
	b.WriteString(`<title>Propagation: share of instances applying each version since its commit</title>`)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#fff" stroke="#d0d7de"/>`, padL, padT, plotW, plotH)
	var xmax time.Duration
	for _, s := range series {
		if n := len(s.Points); n > 0 {
			xmax = max(xmax, s.Points[n-1].Elapsed)
		}
	}
	step := xTick(xmax)
	xmax = max(xmax, step)
	// Round the axis up to a whole tick.
	xmax = time.Duration(math.Ceil(float64(xmax)/float64(step))) * step
	x := func(d time.Duration) float64 { return padL + float64(plotW)*float64(d)/float64(xmax) }
	y := func(share float64) float64 { return padT + float64(plotH)*(1-share) }
	for _, pct := range []float64{0, 0.5, 1} {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eaeef2"/>`, padL, padL+plotW, y(pct), y(pct))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#57606a">%d%%</text>`, padL-6, y(pct)+4, int(pct*100))
	}
	for t := time.Duration(0); t <= xmax; t += step {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#d0d7de"/>`, x(t), x(t), padT+plotH, padT+plotH+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#57606a">%s</text>`, x(t), padT+plotH+16, fmtDuration(t))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" fill="#57606a">since commit</text>`, padL+plotW, chartH-2)
	points := 0
	for _, s := range series {
		points += len(s.Points)
	}
	if points == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#57606a">No version has propagated while this server ran.</text>`,
			padL+plotW/2, padT+plotH/2)
		b.WriteString(`</svg>`)
		return b.String()
	}
	off := len(palette) - len(series)
	for i, s := range series {
		color := palette[max(0, min(len(palette)-1, off+i))]
		width := "1.5"
		if s.Current {
			color, width = palette[len(palette)-1], "2.5"
		}
		var pts strings.Builder
		for j, p := range s.Points {
			if j > 0 { // step: hold the previous share until this sample
				fmt.Fprintf(&pts, "%.1f,%.1f ", x(p.Elapsed), y(s.Points[j-1].Share))
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(p.Elapsed), y(p.Share))
		}
		fmt.Fprintf(&b, `<g class="version" data-version="%d">`, s.Version.Version)
		fmt.Fprintf(&b, `<polyline class="series" data-version="%d" fill="none" stroke="%s" stroke-width="%s" points="%s"/>`,
			s.Version.Version, color, width, strings.TrimSpace(pts.String()))
		for _, p := range s.Points {
			fmt.Fprintf(&b, `<circle class="point" cx="%.1f" cy="%.1f" r="4" fill="%s" fill-opacity="0.25"><title>v%d: %.0f%% of %d instances, %s after its commit</title></circle>`,
				x(p.Elapsed), y(p.Share), color, s.Version.Version, 100*p.Share, p.Instances, fmtDuration(p.Elapsed))
		}
		for _, key := range []string{"0.5", "1"} {
			if d, ok := s.Reached[key]; ok {
				share := 0.5
				if key == "1" {
					share = 1
				}
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>v%d reached %s%% after %s</title></circle>`,
					x(d), y(share), color, s.Version.Version, map[string]string{"0.5": "50", "1": "100"}[key], fmtDuration(d))
			}
		}
		label := fmt.Sprintf("v%d %s", s.Version.Version, cuecast.ShortCommit(s.Version.Commit))
		if s.Unmeasured {
			label += " · instances joined later"
		} else if d, ok := s.Reached["1"]; ok {
			label += " · 100% after " + fmtDuration(d)
		} else if n := len(s.Points); n > 0 {
			label += fmt.Sprintf(" · %.0f%% of %d", 100*s.Points[n-1].Share, s.Points[n-1].Instances)
		}
		ly := legendY + legendDY*(len(series)-1-i)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/>`, legendX, ly-4, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#24292f">%s</text>`, legendX+14, ly, html.EscapeString(label))
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// tickSteps are the x-axis steps on offer, smallest first.
var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// xTick picks the smallest step giving at most about five ticks up to xmax.
func xTick(xmax time.Duration) time.Duration {
	for _, st := range tickSteps {
		if st*5 >= xmax {
			return st
		}
	}
	return tickSteps[len(tickSteps)-1] * time.Duration(math.Ceil(float64(xmax)/float64(5*24*time.Hour)))
}

// fmtDuration writes d compactly: 0, 250ms, 1.5s, 2m30s, 1h5m.
func fmtDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", d.Seconds()), "0"), ".") + "s"
	default:
		return d.Round(time.Second).String()
	}
}
