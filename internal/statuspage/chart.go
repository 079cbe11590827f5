package statuspage

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// Chart is a line chart of durations over a time window, drawn as inline SVG.
type Chart struct {
	// Title names the chart (the SVG's title, for screen readers and tooltips).
	Title string
	// From and To bound the time axis.
	From, To time.Time
	Lines    []Line
}

// Line is one series of a Chart.
type Line struct {
	// Label is the legend's text; Class styles the line ("c0".."c3": colours,
	// "mean": dashed), from the page's CSS.
	Label, Class string
	Points       []Point
}

// Point is one value of a Line, with the tooltip its marker shows.
type Point struct {
	At    time.Time
	Value time.Duration
	Title string
}

// Chart geometry, in SVG user units (the SVG scales to the page's width).
const (
	chartWidth  = 720
	chartHeight = 210
	plotLeft    = 64
	plotRight   = 704
	plotTop     = 14
	plotBottom  = 160
	legendY     = 196
)

// SVG renders c. Every coordinate is computed here and every text is escaped: the
// result is safe to embed in the page as is. Each point has a marker (class
// "point", with a tooltip), so that a single point in a bucket shows even where
// a line cannot.
func (c *Chart) SVG() template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg">`, chartWidth, chartHeight)
	fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(c.Title))

	var top time.Duration
	points := 0
	for _, l := range c.Lines {
		for _, p := range l.Points {
			top = max(top, p.Value)
			points++
		}
	}
	top = niceCeil(top)

	// The axes, three horizontal grid lines with their values, and the time ticks.
	for i := 0; i <= 2; i++ {
		v := top * time.Duration(i) / 2
		y := c.y(v, top)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, plotLeft, y, plotRight, y)
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%.1f" text-anchor="end">%s</text>`, plotLeft-6, y+4, formatDuration(v))
	}
	span := c.To.Sub(c.From)
	for i := 0; i <= 4; i++ {
		at := c.From.Add(span * time.Duration(i) / 4)
		x := c.x(at)
		label := "now"
		if i < 4 {
			label = "−" + formatAgo(c.To.Sub(at))
		}
		fmt.Fprintf(&b, `<line class="tick" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, x, plotBottom, x, plotBottom+4)
		fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, plotBottom+17, label)
	}
	fmt.Fprintf(&b, `<line class="axisline" x1="%d" y1="%d" x2="%d" y2="%d"/>`, plotLeft, plotBottom, plotRight, plotBottom)

	if points == 0 {
		fmt.Fprintf(&b, `<text class="empty" x="%d" y="%d" text-anchor="middle">no data in this window</text>`,
			(plotLeft+plotRight)/2, (plotTop+plotBottom)/2)
	}
	for _, l := range c.Lines {
		if len(l.Points) == 0 {
			continue
		}
		class := template.HTMLEscapeString(l.Class)
		if len(l.Points) > 1 {
			coords := make([]string, len(l.Points))
			for i, p := range l.Points {
				coords[i] = fmt.Sprintf("%.1f,%.1f", c.x(p.At), c.y(p.Value, top))
			}
			fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`, class, strings.Join(coords, " "))
		}
		for _, p := range l.Points {
			fmt.Fprintf(&b, `<circle class="point %s" cx="%.1f" cy="%.1f" r="2.5"><title>%s</title></circle>`,
				class, c.x(p.At), c.y(p.Value, top), template.HTMLEscapeString(p.Title))
		}
	}

	// The legend, left to right.
	x := plotLeft
	for _, l := range c.Lines {
		class := template.HTMLEscapeString(l.Class)
		fmt.Fprintf(&b, `<line class="line %s" x1="%d" y1="%d" x2="%d" y2="%d"/>`, class, x, legendY-4, x+18, legendY-4)
		fmt.Fprintf(&b, `<text class="legend" x="%d" y="%d">%s</text>`, x+24, legendY, template.HTMLEscapeString(l.Label))
		x += 24 + 7*len(l.Label) + 20
	}
	b.WriteString(`</svg>`)
	// Built above from numbers and escaped text only.
	return template.HTML(b.String())
}

// x maps a time to the plot's width, clamped to it.
func (c *Chart) x(at time.Time) float64 {
	span := c.To.Sub(c.From)
	if span <= 0 {
		return plotLeft
	}
	f := float64(at.Sub(c.From)) / float64(span)
	f = math.Max(0, math.Min(1, f))
	return plotLeft + f*(plotRight-plotLeft)
}

// y maps a duration to the plot's height, 0 at the bottom and top at the top.
func (c *Chart) y(v, top time.Duration) float64 {
	f := float64(v) / float64(top)
	f = math.Max(0, math.Min(1, f))
	return plotBottom - f*(plotBottom-plotTop)
}

// niceCeil is the smallest of 1, 2 and 5 ms times a power of ten that is at least
// d (1 ms at least), so that the grid's values read well.
func niceCeil(d time.Duration) time.Duration {
	for scale := time.Millisecond; scale < 1000*time.Hour; scale *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if m*scale >= d {
				return m * scale
			}
		}
	}
	return d
}

// formatDuration writes a duration for an axis or a table: µs, ms or s with at most
// three significant digits.
func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return trimFloat(float64(d)/float64(time.Microsecond)) + " µs"
	case d < time.Second:
		return trimFloat(float64(d)/float64(time.Millisecond)) + " ms"
	default:
		return trimFloat(d.Seconds()) + " s"
	}
}

// trimFloat prints v with up to one decimal below 100, none above.
func trimFloat(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}

// formatAgo writes a time-axis offset: "45 min", "90 s".
func formatAgo(d time.Duration) string {
	if d >= time.Minute && d%time.Minute == 0 {
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return fmt.Sprintf("%d s", d/time.Second)
}
