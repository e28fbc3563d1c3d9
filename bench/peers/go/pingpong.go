package main

import (
	"fmt"
	"time"
)

// ponger answers every ball; pinger serves r balls and counts the returns.
func ponger(in <-chan int, out chan<- int) {
	for v := range in {
		out <- v
	}
}

func pingpong(sz []int) {
	r := sz[0]
	ping, pong := make(chan int, chanCap(1)), make(chan int, chanCap(1))
	go ponger(ping, pong)
	start := time.Now()
	v := 0
	for i := 0; i < r; i++ {
		ping <- v
		v = <-pong + 1
	}
	elapsed := time.Since(start)
	close(ping)
	fmt.Printf("pingpong: %d round trips\n", v)
	report(int64(r), elapsed, -1, v == r)
}
