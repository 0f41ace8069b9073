package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
)

// The chart is drawn with the standard library alone (image/png and a
// 5×7 bitmap font below) rather than a plotting module: a bar chart with
// whiskers and a few labels is a hundred lines, and the module stays free
// of a plotting library's fonts and PDF/SVG back ends.

var toolColors = map[string]color.RGBA{
	"tidemark": {0x1b, 0x7f, 0x79, 0xff},
	"mc":       {0xe0, 0x8a, 0x1e, 0xff},
	"rclone":   {0x6a, 0x4c, 0x93, 0xff},
}

var shortTitles = map[string]string{
	"upload":     "upload stream",
	"checkpoint": "full checkpoint",
	"restore":    "restore",
	"get":        "get to file",
	"download":   "download stream",
	"copy":       "savepoint copy",
}

// writeChart renders the medians as grouped bars, one group per
// operation, with min–max whiskers and Tidemark / best under each group.
func (b *bench) writeChart(path string) error {
	const (
		width, height       = 1200, 640
		left, right, top    = 90, 30, 84
		bottom              = 110
		scale               = 2 // font pixels
		barWidth, barGap    = 44, 8
		plotW, plotH        = width - left - right, height - top - bottom
		whiskerHalf         = 8
		valueLabelClearance = 4
	)
	groupW := plotW / len(b.cfg.ops)
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fill(img, img.Bounds(), color.RGBA{0xff, 0xff, 0xff, 0xff})
	black := color.RGBA{0x20, 0x20, 0x20, 0xff}
	grid := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}

	top1 := 0.0
	for _, s := range b.samples {
		top1 = max(top1, s.mbps())
	}
	step := niceStep(top1 / 5)
	yMax := math.Ceil(top1*1.08/step) * step
	y := func(v float64) int { return top + plotH - int(v/yMax*float64(plotH)) }

	drawText(img, left, 24, scale, black, fmt.Sprintf("RATIO = TIDEMARK / BEST PEER. STREAM %s, CHECKPOINT %d X %s",
		strings.ToUpper(sizeString(b.cfg.streamSize)), b.cfg.files, strings.ToUpper(sizeString(b.cfg.fileSize))))
	drawText(img, left, 4, scale, black, fmt.Sprintf("TIDEMARK VS MC VS RCLONE %s: MEDIAN MB/S OF %d ROUNDS (WHISKERS: MIN-MAX)", RcloneVersion, b.cfg.rounds))
	for v := 0.0; v <= yMax+step/2; v += step {
		fill(img, image.Rect(left, y(v), left+plotW, y(v)+1), grid)
		label := fmt.Sprintf("%.0f", v)
		drawText(img, left-10-textWidth(label, scale), y(v)-7, scale, black, label)
	}
	drawText(img, left-10-textWidth("MB/S", scale), top-28, scale, black, "MB/S")
	fill(img, image.Rect(left, top, left+1, top+plotH), black)
	fill(img, image.Rect(left, top+plotH, left+plotW, top+plotH+1), black)

	for g, op := range b.cfg.ops {
		x0 := left + g*groupW + (groupW-3*barWidth-2*barGap)/2
		for i, tool := range tools {
			st, ok := summarize(b.samples, op, tool)
			if !ok {
				continue
			}
			x := x0 + i*(barWidth+barGap)
			fill(img, image.Rect(x, y(st.median), x+barWidth, top+plotH), toolColors[tool])
			cx := x + barWidth/2
			fill(img, image.Rect(cx, y(st.max), cx+2, y(st.min)+1), black)
			fill(img, image.Rect(cx-whiskerHalf, y(st.max), cx+whiskerHalf, y(st.max)+2), black)
			fill(img, image.Rect(cx-whiskerHalf, y(st.min), cx+whiskerHalf, y(st.min)+2), black)
			label := fmt.Sprintf("%.0f", st.median)
			drawText(img, cx-textWidth(label, 1)/2, y(st.max)-7-valueLabelClearance-2, 1, black, label)
		}
		cx := left + g*groupW + groupW/2
		t := strings.ToUpper(shortTitles[op])
		drawText(img, cx-textWidth(t, scale)/2, top+plotH+14, scale, black, t)
		rv := ratio(b.samples, op)
		r := fmt.Sprintf("RATIO %.2f", rv)
		rc := color.RGBA{0x1a, 0x8a, 0x2e, 0xff} // at or above the best peer
		if rv < 1 {
			rc = color.RGBA{0xc0, 0x20, 0x20, 0xff}
		}
		drawText(img, cx-textWidth(r, scale)/2, top+plotH+40, scale, rc, r)
	}
	// Legend.
	lx := left + 10
	for _, tool := range tools {
		fill(img, image.Rect(lx, height-32, lx+18, height-14), toolColors[tool])
		drawText(img, lx+26, height-30, scale, black, strings.ToUpper(tool))
		lx += 26 + textWidth(tool, scale) + 40
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// niceStep rounds a grid step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func textWidth(s string, scale int) int { return len([]rune(s)) * 6 * scale }

// drawText draws s (upper case; lower case is drawn as upper case) with
// its top-left corner at x, y, each font pixel scale×scale.
func drawText(img *image.RGBA, x, y, scale int, c color.RGBA, s string) {
	for _, r := range strings.ToUpper(s) {
		g, ok := glyphs[r]
		if !ok {
			g = glyphs['?']
		}
		for row, line := range g {
			for col, px := range line {
				if px == '#' {
					fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
				}
			}
		}
		x += 6 * scale
	}
}

// glyphs is a 5×7 bitmap font of the characters the chart uses.
var glyphs = map[rune][7]string{
	'A': {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'B': {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."},
	'C': {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."},
	'D': {"####.", "#...#", "#...#", "#...#", "#...#", "#...#", "####."},
	'E': {"#####", "#....", "#....", "####.", "#....", "#....", "#####"},
	'F': {"#####", "#....", "#....", "####.", "#....", "#....", "#...."},
	'G': {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"},
	'H': {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"},
	'I': {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'J': {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."},
	'K': {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"},
	'L': {"#....", "#....", "#....", "#....", "#....", "#....", "#####"},
	'M': {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"},
	'N': {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"},
	'O': {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."},
	'P': {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."},
	'Q': {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"},
	'R': {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"},
	'S': {".####", "#....", "#....", ".###.", "....#", "....#", "####."},
	'T': {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."},
	'U': {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."},
	'V': {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."},
	'W': {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."},
	'X': {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"},
	'Y': {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."},
	'Z': {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"},
	'0': {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."},
	'1': {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."},
	'2': {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"},
	'3': {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."},
	'4': {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."},
	'5': {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."},
	'6': {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."},
	'7': {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."},
	'8': {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."},
	'9': {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."},
	' ': {".....", ".....", ".....", ".....", ".....", ".....", "....."},
	'.': {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."},
	',': {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."},
	'/': {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."},
	'-': {".....", ".....", ".....", "#####", ".....", ".....", "....."},
	'(': {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."},
	')': {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."},
	':': {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."},
	'%': {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"},
	'=': {".....", ".....", "#####", ".....", "#####", ".....", "....."},
	';': {".....", ".##..", ".##..", ".....", ".##..", "..#..", ".#..."},
	'?': {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."},
}
