package clock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leveehq/levee/internal/testwait"
)

// sleeping runs Sleep(ctx, f, d) on its own goroutine and waits until its
// timer is armed; the returned channel gets Sleep's error.
func sleeping(t *testing.T, ctx context.Context, f *Fake, d time.Duration) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, f, d) }()
	testwait.Until(t, "Sleep's timer", func() bool { return f.Waiters() == 1 })
	return done
}

// result is Sleep's error, failing t if it does not return in time.
func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(testwait.Timeout):
		t.Fatal("Sleep did not return")
		return nil
	}
}

func TestSleepReturnsNilOnceDHasPassed(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := sleeping(t, context.Background(), f, time.Second)
	f.Advance(999 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v before d had passed", err)
	default:
	}
	if f.Waiters() != 1 {
		t.Fatalf("waiters before d = %d, want Sleep's timer", f.Waiters())
	}
	f.Advance(time.Millisecond)
	if err := result(t, done); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
	if got := f.Now(); !got.Equal(time.Unix(1, 0)) {
		t.Fatalf("now = %v", got)
	}
}

func TestSleepReturnsCtxErrWhenCtxEndsFirst(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancelCause(context.Background())
	done := sleeping(t, ctx, f, time.Hour)
	cancel(errors.New("caller left"))
	if err := result(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if f.Waiters() != 0 {
		t.Fatalf("waiters after a cancelled Sleep = %d: its timer was not stopped", f.Waiters())
	}
}

func TestSleepDeadlineExceeded(t *testing.T) {
	// A ctx already past its deadline: the error is DeadlineExceeded, not
	// a wait.
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	f := NewFake(time.Unix(0, 0))
	if err := Sleep(ctx, f, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sleep = %v, want context.DeadlineExceeded", err)
	}
	if f.Waiters() != 0 {
		t.Fatalf("waiters = %d after Sleep returned", f.Waiters())
	}
}

func TestSleepNonPositiveReturnsAtOnce(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	for _, d := range []time.Duration{0, -time.Second} {
		if err := Sleep(context.Background(), f, d); err != nil {
			t.Errorf("Sleep(%v) = %v, want nil", d, err)
		}
		if f.Waiters() != 0 {
			t.Errorf("Sleep(%v) started a timer", d)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, f, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(0) on an ended ctx = %v, want context.Canceled", err)
	}
}
