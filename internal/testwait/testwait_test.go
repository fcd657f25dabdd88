package testwait

import (
	"testing"
	"time"
)

func TestWithin(t *testing.T) {
	n := 0
	if !Within(10*time.Second, time.Millisecond, func() bool { n++; return n == 3 }) {
		t.Fatal("a condition true on the third check timed out")
	}
	if n != 3 {
		t.Fatalf("checked %d times, want 3 (stop at the first true)", n)
	}
	if Within(20*time.Millisecond, 0, func() bool { return false }) {
		t.Fatal("a condition never true was reported as met")
	}
}
