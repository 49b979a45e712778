// Command gatefeed is a feed service asking `bloomgate serve --gate-store URL` which candidates
// a user has not seen yet (GATE.UNSEEN) and recording what it showed (GATE.RECORD), over the
// redigo client. It simulates -users users making -requests requests of 120 candidates, about 2%
// of them shown to that user before, 20 of the unseen ones recorded per request, and checks that
// no candidate recorded for a user before is ever answered unseen (0 duplicates).
//
// Build it without module downloads, against Debian's redigo package:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o gatefeed ./examples/go/gatefeed
//	./gatefeed -addr 127.0.0.1:6379 -requests 1000
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"

	"github.com/gomodule/redigo/redis"
)

const (
	candidatesPerRequest = 120
	seenShare            = 0.02
	recordPerRequest     = 20
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "bloomgate serve's address")
	users := flag.Int("users", 100, "users (gate scopes)")
	requests := flag.Int("requests", 1000, "requests to make")
	seed := flag.Int64("seed", 1, "random seed")
	flag.Parse()

	conn, err := redis.Dial("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(2)
	}
	defer conn.Close()

	rng := rand.New(rand.NewSource(*seed))
	shown := make([][]string, *users)           // per user: items shown, in order
	shownSet := make([]map[string]bool, *users) // the same, to check answers against
	for u := range shownSet {
		shownSet[u] = map[string]bool{}
	}
	nextItem, duplicates, candidates := 0, 0, 0
	for i := 0; i < *requests; i++ {
		u := rng.Intn(*users)
		scope := fmt.Sprintf("user:%d", u)
		args := redis.Args{scope}
		for c := 0; c < candidatesPerRequest; c++ {
			if len(shown[u]) > 0 && rng.Float64() < seenShare {
				args = append(args, shown[u][rng.Intn(len(shown[u]))])
			} else {
				nextItem++
				args = append(args, fmt.Sprintf("item:%d", nextItem))
			}
		}
		// One integer per candidate: 1 = not seen by this user within the gate's window.
		verdict, err := redis.Ints(conn.Do("GATE.UNSEEN", args...))
		if err != nil {
			fmt.Fprintln(os.Stderr, "GATE.UNSEEN:", err)
			os.Exit(1)
		}
		candidates += len(verdict)
		record := redis.Args{scope}
		picked := map[string]bool{}
		for c, unseen := range verdict {
			item := args[c+1].(string)
			if unseen != 1 {
				continue
			}
			if shownSet[u][item] {
				duplicates++
			}
			if len(record) <= recordPerRequest && !picked[item] {
				picked[item] = true
				record = append(record, item)
			}
		}
		if len(record) > 1 {
			// How many items the gate queued for commit (fewer only while its store is down).
			taken, err := redis.Int(conn.Do("GATE.RECORD", record...))
			if err != nil {
				fmt.Fprintln(os.Stderr, "GATE.RECORD:", err)
				os.Exit(1)
			}
			for _, item := range record[1 : 1+taken] {
				shown[u] = append(shown[u], item.(string))
				shownSet[u][item.(string)] = true
			}
		}
	}
	info, err := redis.Values(conn.Do("GATE.INFO"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "GATE.INFO:", err)
		os.Exit(1)
	}
	stats := map[string]interface{}{}
	for i := 0; i+1 < len(info); i += 2 {
		name, _ := redis.String(info[i], nil)
		stats[name] = info[i+1]
	}
	lookups, _ := redis.Int(stats["store_lookups"], nil)
	fmt.Printf("go gatefeed: %d requests, %d candidates, %d duplicates, store_lookups %d\n",
		*requests, candidates, duplicates, lookups)
	if duplicates != 0 {
		os.Exit(1)
	}
}
