package main

import (
	"fmt"
	"time"
)

// skynetActor is one node: a leaf replies its ordinal, an inner node spawns
// ten children and replies the sum of their replies.
func skynetActor(parent chan<- int64, num, size int64) {
	if size == 1 {
		parent <- num
		return
	}
	box := make(chan int64, 10)
	step := size / 10
	for i := int64(0); i < 10; i++ {
		go skynetActor(box, num+i*step, step)
	}
	var sum int64
	for i := 0; i < 10; i++ {
		sum += <-box
	}
	parent <- sum
}

func skynet([]int) {
	start := time.Now()
	root := make(chan int64, 1)
	go skynetActor(root, 0, 1000000)
	sum := <-root
	elapsed := time.Since(start)
	fmt.Printf("skynet: sum %d in %.3f s\n", sum, elapsed.Seconds())
	report(1111111, elapsed, -1, sum == 499999500000)
}
