package main

import (
	"fmt"
	"sync"
	"time"
)

// A link is emulated by a channel that is closed when its owner dies: each
// actor waits on its predecessor's and, when that one dies abnormally, dies
// too, closing its own. The monitor is the last actor's channel.
func chainActor(prev <-chan struct{}, dead chan<- struct{}, ready *sync.WaitGroup) {
	ready.Done()
	<-prev
	close(dead)
}

func chain(sz []int) {
	n := sz[0]
	start := time.Now()
	first := make(chan struct{}) // the first actor's death
	prev := first
	var ready sync.WaitGroup // setup ends when every actor has started
	ready.Add(n - 1)
	for i := 1; i < n; i++ {
		dead := make(chan struct{})
		go chainActor(prev, dead, &ready)
		prev = dead
	}
	ready.Wait()
	last := prev
	setup := time.Since(start)
	fmt.Printf("chain: %d actors spawned in %.3f s\n", n, setup.Seconds())

	start = time.Now()
	close(first) // the first exits abnormally
	<-last
	elapsed := time.Since(start)
	fmt.Printf("chain: last of %d dead after %.3f s\n", n, elapsed.Seconds())
	report(int64(n), elapsed, setup, true)
}
