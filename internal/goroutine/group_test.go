package goroutine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestGroupWaitsForNestedGoroutines(t *testing.T) {
	var g Group
	if err := g.Wait(context.Background()); err != nil {
		t.Fatalf("Wait on an empty group: %v", err)
	}
	var ran atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{})
	g.Go(func() {
		close(started)
		<-release
		// A tracked goroutine starts another while Wait is waiting.
		g.Go(func() { <-release; ran.Add(1) })
		ran.Add(1)
	})
	<-started
	waited := make(chan error, 1)
	go func() { waited <- g.Wait(context.Background()) }()
	select {
	case err := <-waited:
		t.Fatalf("Wait returned %v while a goroutine runs", err)
	default:
	}
	close(release)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if n := ran.Load(); n != 2 {
		t.Fatalf("Wait returned after %d of 2 goroutines", n)
	}
	// The group is reusable.
	g.Go(func() { ran.Add(1) })
	if err := g.Wait(context.Background()); err != nil || ran.Load() != 3 {
		t.Fatalf("second round: %v, ran %d", err, ran.Load())
	}
}

func TestGroupWaitContext(t *testing.T) {
	var g Group
	release := make(chan struct{})
	g.Go(func() { <-release })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want DeadlineExceeded", err)
	}
	close(release)
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}
