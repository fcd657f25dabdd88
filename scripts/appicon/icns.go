package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"io"
)

// ErrIconSize: the source is not a square of IconSize pixels.
var ErrIconSize = errors.New("icon source must be 1024×1024")

// IconSize is the side of the source image, the largest icns entry.
const IconSize = 1024

// icnsEntries are the PNG-capable icns types macOS uses, by pixel size.
var icnsEntries = []struct {
	typ  string
	size int
}{
	{"icp4", 16}, {"icp5", 32}, {"ic11", 32}, {"ic12", 64}, {"ic07", 128},
	{"ic13", 256}, {"ic08", 256}, {"ic14", 512}, {"ic09", 512}, {"ic10", 1024},
}

// WriteICNS writes src, and halvings of it, as an Apple icon file: the
// "icns" header, then one PNG per entry type.
func WriteICNS(w io.Writer, src image.Image) error {
	if b := src.Bounds(); b.Dx() != IconSize || b.Dy() != IconSize {
		return fmt.Errorf("%w, got %d×%d", ErrIconSize, b.Dx(), b.Dy())
	}
	levels := map[int]*image.RGBA{}
	img := image.NewRGBA(image.Rect(0, 0, IconSize, IconSize))
	draw.Draw(img, img.Bounds(), src, src.Bounds().Min, draw.Src)
	for size := IconSize; size >= 16; size /= 2 {
		levels[size] = img
		img = halve(img)
	}
	var body bytes.Buffer
	for _, e := range icnsEntries {
		var p bytes.Buffer
		if err := png.Encode(&p, levels[e.size]); err != nil {
			return err
		}
		body.WriteString(e.typ)
		binary.Write(&body, binary.BigEndian, uint32(8+p.Len()))
		body.Write(p.Bytes())
	}
	var head bytes.Buffer
	head.WriteString("icns")
	binary.Write(&head, binary.BigEndian, uint32(8+body.Len()))
	if _, err := w.Write(head.Bytes()); err != nil {
		return err
	}
	_, err := w.Write(body.Bytes())
	return err
}

// halve scales down by two with a box filter; RGBA is premultiplied, so
// averaging keeps edges against transparency clean.
func halve(src *image.RGBA) *image.RGBA {
	n := src.Bounds().Dx() / 2
	dst := image.NewRGBA(image.Rect(0, 0, n, n))
	for y := range n {
		for x := range n {
			var sum [4]int
			for _, d := range [4][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
				i := src.PixOffset(2*x+d[0], 2*y+d[1])
				for c := range 4 {
					sum[c] += int(src.Pix[i+c])
				}
			}
			j := dst.PixOffset(x, y)
			for c := range 4 {
				dst.Pix[j+c] = uint8((sum[c] + 2) / 4)
			}
		}
	}
	return dst
}
