package ctxutil

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepEndsWithItsContext(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("a sleep that ran out: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("a sleep whose context ended: %v", err)
	}
}

func TestWithDoneEndsWithTheParentOrDone(t *testing.T) {
	done := make(chan struct{})
	ctx, cancel := WithDone(context.Background(), done)
	defer cancel()
	close(done)
	<-ctx.Done() // the test's deadline catches a context that never ends

	parent, cancelParent := context.WithCancel(context.Background())
	ctx2, cancel2 := WithDone(parent, make(chan struct{}))
	defer cancel2()
	cancelParent()
	<-ctx2.Done()
}
