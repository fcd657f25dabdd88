package main

import (
	"image"
	"image/color"
	"math"
)

// Draw renders the icon: a rounded tile on Apple's icon grid (824 px in
// 1024) with a night-blue gradient, a sand dune along the bottom and a
// white shell prompt "›_" — a sandbox for command-line agents.
func Draw() *image.RGBA {
	const n = IconSize
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	const ss = 4 // supersampling per axis, for anti-aliased edges
	for y := range n {
		for x := range n {
			var r, g, b, a float64
			for sy := range ss {
				for sx := range ss {
					px := float64(x) + (float64(sx)+0.5)/ss
					py := float64(y) + (float64(sy)+0.5)/ss
					c, ok := sample(px, py)
					if ok {
						r, g, b, a = r+c[0], g+c[1], b+c[2], a+1
					}
				}
			}
			const k = ss * ss
			// Premultiplied: colour sums over covered samples / all samples.
			img.SetRGBA(x, y, color.RGBA{
				R: uint8(math.Round(r / k * 255)), G: uint8(math.Round(g / k * 255)),
				B: uint8(math.Round(b / k * 255)), A: uint8(math.Round(a / k * 255)),
			})
		}
	}
	return img
}

// sample is the icon's colour at a point, ok false outside the tile.
func sample(x, y float64) (c [3]float64, ok bool) {
	const lo, hi, radius = 100.0, 924.0, 185.0
	if !inRoundedRect(x, y, lo, hi, radius) {
		return c, false
	}
	t := (y - lo) / (hi - lo)
	c = mix([3]float64{0.09, 0.16, 0.33}, [3]float64{0.05, 0.40, 0.52}, t)
	// The dune: a gentle wave, lighter at its crest.
	crest := 700 + 38*math.Sin((x-100)/824*2*math.Pi*1.2)
	if y > crest {
		c = mix([3]float64{0.96, 0.84, 0.60}, [3]float64{0.86, 0.68, 0.42}, (y-crest)/(hi-crest))
	}
	// The prompt: a chevron and an underscore, in white.
	const stroke = 34.0
	if distSeg(x, y, 290, 330, 430, 450) < stroke || distSeg(x, y, 430, 450, 290, 570) < stroke ||
		distSeg(x, y, 500, 570, 700, 570) < stroke {
		c = [3]float64{1, 1, 1}
	}
	return c, true
}

func inRoundedRect(x, y, lo, hi, r float64) bool {
	cx := math.Max(lo+r, math.Min(x, hi-r))
	cy := math.Max(lo+r, math.Min(y, hi-r))
	return x >= lo && x <= hi && y >= lo && y <= hi && math.Hypot(x-cx, y-cy) <= r
}

// distSeg is the distance from (x, y) to the segment (x1, y1)-(x2, y2):
// strokes drawn with it get round caps and joins.
func distSeg(x, y, x1, y1, x2, y2 float64) float64 {
	dx, dy := x2-x1, y2-y1
	t := math.Max(0, math.Min(1, ((x-x1)*dx+(y-y1)*dy)/(dx*dx+dy*dy)))
	return math.Hypot(x-(x1+t*dx), y-(y1+t*dy))
}

func mix(a, b [3]float64, t float64) [3]float64 {
	t = math.Max(0, math.Min(1, t))
	return [3]float64{a[0] + (b[0]-a[0])*t, a[1] + (b[1]-a[1])*t, a[2] + (b[2]-a[2])*t}
}
