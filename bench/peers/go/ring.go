package main

import (
	"fmt"
	"sync"
	"time"
)

// A token: which one it is and how many hops it has made.
type token struct{ id, hops int32 }

// ringActor forwards every token to its successor until it has made n hops,
// then hands it to the driver.
func ringActor(in <-chan token, next chan<- token, done chan<- token, n int32, ready *sync.WaitGroup) {
	ready.Done()
	for t := range in {
		if t.hops == n {
			done <- t
			continue
		}
		t.hops++
		next <- t
	}
}

func ring(sz []int) {
	n, m := sz[0], sz[1]
	if m > n {
		fmt.Println("ring: M must not exceed N")
		usage(2)
	}
	start := time.Now()
	// 64 slots: the fastest of the capacities swept (0 to 1,024,
	// README.md); a token then rarely finds its successor's mailbox full,
	// so a hop seldom parks the sender.
	boxes := make([]chan token, n)
	c := chanCap(64)
	for i := range boxes {
		boxes[i] = make(chan token, c)
	}
	done := make(chan token, m)
	var ready sync.WaitGroup // setup ends when every actor has started
	ready.Add(n)
	for i := range boxes {
		go ringActor(boxes[i], boxes[(i+1)%n], done, int32(n), &ready)
	}
	ready.Wait()
	setup := time.Since(start)
	fmt.Printf("ring: %d actors spawned in %.3f s\n", n, setup.Seconds())

	start = time.Now()
	for j := 0; j < m; j++ {
		boxes[j*(n/m)] <- token{int32(j), 0}
	}
	seen := make([]bool, m)
	ok := true
	for j := 0; j < m; j++ {
		t := <-done
		if t.hops != int32(n) || seen[t.id] {
			ok = false
		}
		seen[t.id] = true
	}
	elapsed := time.Since(start)
	fmt.Printf("ring: %d tokens x %d hops in %.3f s\n", m, n, elapsed.Seconds())
	report(int64(n)*int64(m), elapsed, setup, ok)
}
