package main

import (
	"fmt"
	"time"
)

// selfActor sends one message to its own mailbox and re-sends on every
// receipt until it has received k; then it reports its count.
func selfActor(k int, done chan<- int) {
	box := make(chan int, chanCap(1)) // at least 1: it sends to itself
	box <- 0
	received := 0
	for v := range box {
		received++
		if received == k {
			break
		}
		box <- v + 1
	}
	done <- received
}

func selfsend(sz []int) {
	a, k := sz[0], sz[1]
	done := make(chan int, a)
	start := time.Now()
	for i := 0; i < a; i++ {
		go selfActor(k, done)
	}
	var total int64
	for i := 0; i < a; i++ {
		total += int64(<-done)
	}
	elapsed := time.Since(start)
	fmt.Printf("selfsend: %d actors, %d messages\n", a, total)
	report(int64(a)*int64(k), elapsed, -1, total == int64(a)*int64(k))
}
