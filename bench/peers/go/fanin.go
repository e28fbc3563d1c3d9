package main

import (
	"fmt"
	"time"
)

func producer(out chan<- int64, k int) {
	for i := 1; i <= k; i++ {
		out <- int64(i)
	}
}

func fanin(sz []int) {
	p, k := sz[0], sz[1]
	box := make(chan int64, chanCap(1024))
	start := time.Now()
	for i := 0; i < p; i++ {
		go producer(box, k)
	}
	var count, sum int64
	total := int64(p) * int64(k)
	for count < total {
		sum += <-box
		count++
	}
	elapsed := time.Since(start)
	want := int64(p) * int64(k) * int64(k+1) / 2
	fmt.Printf("fanin: %d messages, sum %d (want %d)\n", count, sum, want)
	report(total, elapsed, -1, sum == want)
}
