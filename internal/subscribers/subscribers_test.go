package subscribers

import (
	"slices"
	"testing"
)

func TestAddNotifyCancel(t *testing.T) {
	var l List[int]
	var a, b []int
	cancelA := l.Add(func(v int) { a = append(a, v) })
	l.Add(func(v int) { b = append(b, v) })
	l.Notify(1)
	cancelA()
	cancelA() // twice is harmless
	l.Notify(2)
	if !slices.Equal(a, []int{1}) || !slices.Equal(b, []int{1, 2}) {
		t.Fatalf("a=%v b=%v, want a=[1] (cancelled after the first) b=[1 2]", a, b)
	}
}

func TestCallbackMayCancelItself(t *testing.T) {
	var l List[struct{}]
	calls := 0
	var cancel func()
	cancel = l.Add(func(struct{}) { calls++; cancel() })
	l.Notify(struct{}{}) // would deadlock if Notify held the lock
	l.Notify(struct{}{})
	if calls != 1 {
		t.Fatalf("%d calls, want 1: the callback cancelled itself on the first", calls)
	}
}

func TestSnapshotIsFixed(t *testing.T) {
	var l List[int]
	l.Add(func(int) {})
	fns := l.Snapshot()
	l.Add(func(int) {})
	if len(fns) != 1 || len(l.Snapshot()) != 2 {
		t.Fatalf("snapshot has %d, list %d; want 1 and 2", len(fns), len(l.Snapshot()))
	}
}
