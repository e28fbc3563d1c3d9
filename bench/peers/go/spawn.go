package main

import (
	"fmt"
	"sync"
	"time"
)

// Each actor runs one turn and exits normally; the WaitGroup is the monitor
// that sees all of them gone.
func spawn(sz []int) {
	n := sz[0]
	var gone sync.WaitGroup
	start := time.Now()
	gone.Add(n)
	for i := 0; i < n; i++ {
		go func() { gone.Done() }()
	}
	gone.Wait()
	elapsed := time.Since(start)
	fmt.Printf("spawn: %d actors gone in %.3f s\n", n, elapsed.Seconds())
	report(int64(n), elapsed, -1, true)
}
