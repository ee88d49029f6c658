package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// panel is one setup's chart: the provider's per-second counts and the
// limits to read them against.
type panel struct {
	name     string
	accepted plotter.XYs // calls accepted per second
	refused  plotter.XYs // 429s sent per second
	// requestLimit is the request limit in calls per second; tokenLimit the
	// input-token limit in calls per second at this run's mean prompt.
	requestLimit, tokenLimit float64
	window                   float64 // seconds
	// killed and restarted are when a fault run killed its replica and
	// restarted Redis, in seconds; 0 in other runs.
	killed, restarted float64
}

// newPanel turns a run into a panel, with x in seconds since the load
// started.
func newPanel(name string, r setupRun, l limits) panel {
	p := panel{name: name, requestLimit: l.perSecond(), window: r.result.Window.Seconds()}
	if r.result.WindowAccepted > 0 {
		meanPrompt := float64(r.result.WindowInputTokens) / float64(r.result.WindowAccepted)
		p.tokenLimit = float64(l.InputTokens) / l.Period.Seconds() / meanPrompt
	}
	origin := r.start.Truncate(1e9)
	if r.faults != nil {
		lead := r.start.Sub(origin)
		p.killed, p.restarted = (lead + r.faults.Killed).Seconds(), (lead + r.faults.Restarted).Seconds()
	}
	for _, s := range r.series {
		x := s.Start.Sub(origin).Seconds()
		p.accepted = append(p.accepted, plotter.XY{X: x, Y: float64(s.Accepted)})
		p.refused = append(p.refused, plotter.XY{X: x, Y: float64(s.TooManyRequests)})
	}
	return p
}

var (
	acceptedColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	refusedColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	limitColor    = color.RGBA{A: 0xff}
	tokenColor    = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	windowColor   = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
	killColor     = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	restartColor  = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
)

// writeChart draws one panel per setup, stacked on a shared time axis, into
// a PNG at path.
func writeChart(path, subtitle string, panels []panel) error {
	xmax, ymax := 0.0, 0.0
	for _, p := range panels {
		for _, xy := range append(append(plotter.XYs{}, p.accepted...), p.refused...) {
			xmax, ymax = max(xmax, xy.X+1), max(ymax, xy.Y)
		}
		ymax = max(ymax, p.requestLimit, p.tokenLimit)
	}
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		pl, err := p.plot(xmax, ymax*1.6) // room above the data for the legend
		if err != nil {
			return err
		}
		if i == 0 {
			pl.Title.Text = "Accepted provider calls per second\n" + subtitle
		}
		if i == len(panels)-1 {
			pl.X.Label.Text = "seconds since the load started"
		}
		rows[i] = []*plot.Plot{pl}
	}

	const w, h = 9 * vg.Inch, 11 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func (p panel) plot(xmax, ymax float64) (*plot.Plot, error) {
	pl := plot.New()
	pl.Y.Label.Text = p.name + "\ncalls/s"
	pl.X.Min, pl.X.Max, pl.Y.Min, pl.Y.Max = 0, xmax, 0, ymax
	pl.Legend.Top = true
	pl.Add(plotter.NewGrid())

	hline := func(y float64, c color.Color, dashes []vg.Length, label string) {
		l, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: xmax, Y: y}})
		l.Color, l.Dashes, l.Width = c, dashes, vg.Points(1.2)
		pl.Add(l)
		pl.Legend.Add(label, l)
	}
	hline(p.requestLimit, limitColor, []vg.Length{vg.Points(6), vg.Points(3)}, fmt.Sprintf("request limit %.0f/s", p.requestLimit))
	if p.tokenLimit > 0 {
		hline(p.tokenLimit, tokenColor, []vg.Length{vg.Points(2), vg.Points(2)},
			fmt.Sprintf("input-token limit ÷ mean prompt ≈ %.1f/s", p.tokenLimit))
	}
	end, _ := plotter.NewLine(plotter.XYs{{X: p.window, Y: 0}, {X: p.window, Y: ymax}})
	end.Color, end.Dashes = windowColor, []vg.Length{vg.Points(1), vg.Points(3)}
	pl.Add(end)
	for _, f := range []struct {
		x     float64
		c     color.Color
		label string
	}{
		{p.killed, killColor, "replica 0 killed"},
		{p.restarted, restartColor, "Redis restarted empty"},
	} {
		if f.x <= 0 {
			continue
		}
		l, _ := plotter.NewLine(plotter.XYs{{X: f.x, Y: 0}, {X: f.x, Y: ymax}})
		l.Color, l.Width = f.c, vg.Points(1.2)
		pl.Add(l)
		pl.Legend.Add(f.label, l)
	}

	for _, s := range []struct {
		xys   plotter.XYs
		c     color.Color
		width vg.Length
		label string
	}{
		{p.refused, refusedColor, vg.Points(1), "429s"},
		{p.accepted, acceptedColor, vg.Points(1.8), "accepted"},
	} {
		if len(s.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.PostStep
		l.Color, l.Width = s.c, s.width
		pl.Add(l)
		pl.Legend.Add(s.label, l)
	}
	return pl, nil
}
