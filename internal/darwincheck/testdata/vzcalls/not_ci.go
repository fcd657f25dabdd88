//go:build darwin && !ci

package vz

func brokenCall() {}
