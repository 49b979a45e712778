// Command gatetier is a feed service in front of a tier of gate processes (`bloomgate serve
// --gate-store postgres://... --gate-filters redis+cluster://...`, any number of them): each
// request goes to a random gate, and one that fails (a gate killed, a cluster node failing
// over) is sent again to another gate after a pause. It simulates -users users making -requests
// requests of 120 candidates (about 2% of them shown to the user before), -concurrency at a
// time, and records 20 of the unseen ones per request (GATE.RECORD is idempotent: a retry after
// an error is safe). A user's requests run one at a time, as a user's feed refreshes do.
//
// It checks what the gate promises and prints one JSON line at the end:
//   - duplicates: candidates answered unseen although a GATE.RECORD of them for that user was
//     acknowledged before the request started (must be 0);
//   - false_seen: candidates answered seen that were never sent in a GATE.RECORD for that user
//     (must be 0 under the verify policy);
//   - unread: acknowledged items that a final GATE.UNSEEN pass over every user (on any gate)
//     answers unseen (must be 0);
//   - failed: requests that still failed after -attempts tries.
//
// While it runs it prints "progress N" after every 100 requests done, so a harness can act
// half-way (kill a gate, fail a master over); with -hold it stops before the read-back until
// a line arrives on stdin (the harness reads the gates' counters of the requests meanwhile).
//
// Build it without module downloads, against Debian's redigo package:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o gatetier ./examples/go/gatetier
//	./gatetier -addrs 127.0.0.1:6401,127.0.0.1:6402,127.0.0.1:6403 -requests 4000
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

const (
	candidatesPerRequest = 120
	seenShare            = 0.02
	recordPerRequest     = 20
)

// user is one scope's truth, guarded by its mutex (held for a whole request).
type user struct {
	sync.Mutex
	shown     []string        // acknowledged, in order
	acked     map[string]bool // acknowledged by a GATE.RECORD reply
	attempted map[string]bool // sent in a GATE.RECORD (acknowledged or not)
}

// gates hands out connections to random gates; a connection that failed is closed.
type gates struct {
	addrs   []string
	timeout time.Duration
}

func (g *gates) dial(rng *rand.Rand) (redis.Conn, string, error) {
	addr := g.addrs[rng.Intn(len(g.addrs))]
	conn, err := redis.Dial("tcp", addr,
		redis.DialConnectTimeout(g.timeout),
		redis.DialReadTimeout(g.timeout),
		redis.DialWriteTimeout(g.timeout))
	return conn, addr, err
}

type stats struct {
	sync.Mutex
	Requests       int            `json:"requests"`
	Candidates     int            `json:"candidates"`
	Failed         int            `json:"failed"`
	AttemptErrors  int            `json:"attempt_errors"`
	RetriedBy1000  []int          `json:"retried_by_thousand"`
	Duplicates     int            `json:"duplicates"`
	FalseSeen      int            `json:"false_seen"`
	Acknowledged   int            `json:"acknowledged"`
	Unread         int            `json:"unread"`
	Errors         map[string]int `json:"errors"`
	Seconds        float64        `json:"seconds"`
	RequestSeconds float64        `json:"request_seconds"`
}

func (s *stats) attemptFailed(err error) {
	s.Lock()
	defer s.Unlock()
	s.AttemptErrors++
	text := err.Error()
	if len(text) > 60 {
		text = text[:60]
	}
	if len(s.Errors) < 50 || s.Errors[text] > 0 {
		s.Errors[text]++
	}
}

// attempt runs do on a random gate, up to attempts times with pause between; it returns the
// last error if all failed, and sets *retried if any try failed.
func attempt(g *gates, rng *rand.Rand, attempts int, pause time.Duration, st *stats,
	retried *bool, do func(redis.Conn) error) error {
	var last error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			time.Sleep(pause)
		}
		conn, _, err := g.dial(rng)
		if err == nil {
			err = do(conn)
			conn.Close()
		}
		if err == nil {
			return nil
		}
		st.attemptFailed(err)
		*retried = true
		last = err
	}
	return last
}

func main() {
	addrs := flag.String("addrs", "127.0.0.1:6379", "gate addresses, comma-separated")
	users := flag.Int("users", 200, "users (gate scopes)")
	requests := flag.Int("requests", 4000, "requests to make")
	concurrency := flag.Int("concurrency", 8, "requests in flight")
	attempts := flag.Int("attempts", 40, "tries per request before it counts as failed")
	pause := flag.Duration("pause", 150*time.Millisecond, "pause between two tries")
	timeout := flag.Duration("timeout", 12*time.Second, "connect/read/write timeout per try")
	seed := flag.Int64("seed", 1, "random seed")
	hold := flag.Bool("hold", false, `print "requests done" and wait for a line on stdin before the read-back`)
	readback := flag.Bool("readback", true, "read every acknowledged item back at the end")
	known := flag.Int("known", 0, `items each user was shown before the run, named "fill:U:J" (a benchmark's fill)`)
	flag.Parse()

	g := &gates{addrs: strings.Split(*addrs, ","), timeout: *timeout}
	people := make([]*user, *users)
	for u := range people {
		people[u] = &user{acked: map[string]bool{}, attempted: map[string]bool{}}
		for j := 0; j < *known; j++ {
			item := fmt.Sprintf("fill:%d:%d", u, j)
			people[u].shown = append(people[u].shown, item)
			people[u].acked[item] = true
			people[u].attempted[item] = true
		}
	}
	st := &stats{Errors: map[string]int{}, RetriedBy1000: make([]int, (*requests+999)/1000)}
	var nextItem int64
	var itemMu sync.Mutex
	newItem := func() string {
		itemMu.Lock()
		defer itemMu.Unlock()
		nextItem++
		return fmt.Sprintf("item:%d", nextItem)
	}
	started := time.Now()
	work := make(chan int)
	var done sync.WaitGroup
	var progress sync.Mutex
	finished := 0
	for w := 0; w < *concurrency; w++ {
		done.Add(1)
		go func(w int) {
			defer done.Done()
			rng := rand.New(rand.NewSource(*seed*1000 + int64(w)))
			for i := range work {
				u := rng.Intn(*users)
				if request(g, rng, people[u], fmt.Sprintf("user:%d", u), newItem, *attempts, *pause, st) {
					st.Lock()
					st.RetriedBy1000[i/1000]++
					st.Unlock()
				}
				progress.Lock()
				finished++
				if finished%100 == 0 {
					fmt.Printf("progress %d\n", finished)
				}
				progress.Unlock()
			}
		}(w)
	}
	for i := 0; i < *requests; i++ {
		work <- i
	}
	close(work)
	done.Wait()

	st.RequestSeconds = time.Since(started).Seconds()
	if *hold {
		// The harness reads the gates' counters of the requests alone, then lets us go on.
		fmt.Println("requests done")
		bufio.NewReader(os.Stdin).ReadString('\n')
	}

	// Every acknowledged item reads back as seen, on any gate.
	rng := rand.New(rand.NewSource(*seed))
	for u, p := range people {
		if !*readback {
			st.Acknowledged += len(p.shown) - *known
			continue
		}
		scope := fmt.Sprintf("user:%d", u)
		for at := 0; at < len(p.shown); at += 500 {
			end := at + 500
			if end > len(p.shown) {
				end = len(p.shown)
			}
			args := redis.Args{scope}.AddFlat(p.shown[at:end])
			var verdict []int
			var retried bool
			err := attempt(g, rng, *attempts, *pause, st, &retried, func(c redis.Conn) error {
				var err error
				verdict, err = redis.Ints(c.Do("GATE.UNSEEN", args...))
				return err
			})
			if err != nil {
				st.Unread += end - at
				continue
			}
			for _, unseen := range verdict {
				if unseen == 1 {
					st.Unread++
				}
			}
		}
		st.Acknowledged += len(p.shown) - *known
	}
	st.Seconds = time.Since(started).Seconds()
	out, _ := json.Marshal(st)
	fmt.Printf("result %s\n", out)
	if st.Duplicates != 0 || st.FalseSeen != 0 || st.Unread != 0 {
		os.Exit(1)
	}
}

// request is one feed request of one user: GATE.UNSEEN of 120 candidates on a gate, checked
// against the user's truth, then GATE.RECORD of up to 20 unseen ones (any gate, retried). It
// says whether any try failed.
func request(g *gates, rng *rand.Rand, p *user, scope string, newItem func() string,
	attempts int, pause time.Duration, st *stats) (retried bool) {
	p.Lock()
	defer p.Unlock()
	args := redis.Args{scope}
	for c := 0; c < candidatesPerRequest; c++ {
		if len(p.shown) > 0 && rng.Float64() < seenShare {
			args = append(args, p.shown[rng.Intn(len(p.shown))])
		} else {
			args = append(args, newItem())
		}
	}
	var verdict []int
	err := attempt(g, rng, attempts, pause, st, &retried, func(c redis.Conn) error {
		var err error
		verdict, err = redis.Ints(c.Do("GATE.UNSEEN", args...))
		if err == nil && len(verdict) != candidatesPerRequest {
			err = fmt.Errorf("GATE.UNSEEN answered %d values", len(verdict))
		}
		return err
	})
	st.Lock()
	st.Requests++
	if err != nil {
		st.Failed++
		st.Unlock()
		return
	}
	st.Candidates += len(verdict)
	record := redis.Args{scope}
	picked := map[string]bool{}
	for c, unseen := range verdict {
		item := args[c+1].(string)
		if unseen == 1 && p.acked[item] {
			st.Duplicates++
		}
		if unseen == 0 && !p.attempted[item] {
			st.FalseSeen++
		}
		if unseen == 1 && len(record) <= recordPerRequest && !picked[item] {
			picked[item] = true
			record = append(record, item)
		}
	}
	st.Unlock()
	if len(record) == 1 {
		return
	}
	for _, item := range record[1:] {
		p.attempted[item.(string)] = true
	}
	var taken int
	err = attempt(g, rng, attempts, pause, st, &retried, func(c redis.Conn) error {
		var err error
		taken, err = redis.Int(c.Do("GATE.RECORD", record...))
		return err
	})
	if err != nil {
		st.Lock()
		st.Failed++
		st.Unlock()
		return
	}
	for _, item := range record[1 : 1+taken] {
		p.shown = append(p.shown, item.(string))
		p.acked[item.(string)] = true
	}
	return
}
