// Command appicon draws the app icon and packs it for macOS.
//
//	go run ./scripts/appicon -png assets/AppIcon.png   # redraw the source
//	go run ./scripts/appicon -icns OUT.icns assets/AppIcon.png
//
// The .icns is written in Go, so `make app` needs no iconutil and the
// format is tested on Linux.
package main

import (
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
)

func main() {
	pngOut := flag.String("png", "", "draw the 1024×1024 icon into this PNG file")
	icnsOut := flag.String("icns", "", "pack the PNG given as argument into this .icns file")
	flag.Parse()
	if err := run(*pngOut, *icnsOut, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "appicon:", err)
		os.Exit(1)
	}
}

func run(pngOut, icnsOut string, args []string) error {
	switch {
	case pngOut != "" && icnsOut == "" && len(args) == 0:
		return writePNG(pngOut, Draw())
	case icnsOut != "" && pngOut == "" && len(args) == 1:
		src, err := readPNG(args[0])
		if err != nil {
			return err
		}
		f, err := os.Create(icnsOut)
		if err != nil {
			return err
		}
		if err := WriteICNS(f, src); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", icnsOut, err)
		}
		return f.Close()
	}
	return fmt.Errorf("usage: appicon -png OUT.png | appicon -icns OUT.icns SOURCE.png")
}

func readPNG(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return img, nil
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
