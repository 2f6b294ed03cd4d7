package clock

import (
	"testing"
	"time"
)

func TestFakeTimerFiresOnlyWhenDue(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tm := f.NewTimer(time.Second)
	f.Advance(999 * time.Millisecond)
	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}
	f.Advance(time.Millisecond)
	select {
	case got := <-tm.C():
		if !got.Equal(time.Unix(1, 0)) {
			t.Fatalf("fired at %v, want 1s", got)
		}
	default:
		t.Fatal("timer did not fire when due")
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported active")
	}
}

func TestFakeTickerRepeats(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tk := f.NewTicker(10 * time.Millisecond)
	n := 0
	for i := 0; i < 5; i++ {
		f.Advance(10 * time.Millisecond)
		select {
		case <-tk.C():
			n++
		default:
		}
	}
	if n != 5 {
		t.Fatalf("ticks = %d, want 5", n)
	}
	tk.Stop()
	if f.Waiters() != 0 {
		t.Fatalf("waiters after Stop = %d", f.Waiters())
	}
}
