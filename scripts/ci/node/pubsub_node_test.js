// node-redis' pub/sub API against `bloomgate serve`, in RESP2 and RESP3: subscribe and
// pSubscribe with listeners, a PUBLISH delivered to both, PUBSUB CHANNELS / NUMSUB / NUMPAT, a
// keyevent from BF.ADD with notify-keyspace-events set, then unsubscribe / pUnsubscribe (a
// PUBLISH afterwards reaches nobody).
// Usage: node pubsub_node_test.js PORT   (node-redis found through NODE_PATH)
"use strict";
const { createClient } = require("redis");

const failures = [];
const check = (name, ok, detail) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${ok ? "" : ": " + JSON.stringify(detail)}`);
  if (!ok) failures.push(name);
};

// Messages a listener received, and a way to wait (at most 10 s) for the next few.
function inbox() {
  const got = [];
  let wake = null;
  return {
    listener: (tag) => (message, channel) => {
      got.push([tag, String(channel), String(message)]);
      if (wake) wake();
    },
    async take(n) {
      const deadline = Date.now() + 10000;
      while (got.length < n && Date.now() < deadline) {
        await new Promise((resolve) => {
          wake = resolve;
          setTimeout(resolve, 200);
        });
        wake = null;
      }
      return got.splice(0, n);
    },
  };
}

async function run(port, resp) {
  const tag = `resp${resp}`;
  const options = { socket: { host: "127.0.0.1", port }, RESP: resp };
  const client = createClient(options);
  client.on("error", (e) => console.error("client error", e));
  await client.connect();
  const subscriber = client.duplicate();
  subscriber.on("error", (e) => console.error("subscriber error", e));
  await subscriber.connect();

  const box = inbox();
  await subscriber.subscribe("news", box.listener("message"));
  await subscriber.pSubscribe("n*", box.listener("pmessage"));
  const receivers = await client.publish("news", "hello");
  check(`${tag} publish reaches channel and pattern`, receivers === 2, receivers);
  const messages = (await box.take(2)).map((m) => m.join(" ")).sort();
  check(
    `${tag} message and pattern message`,
    JSON.stringify(messages) === JSON.stringify(["message news hello", "pmessage news hello"]),
    messages,
  );
  const channels = (await client.pubSubChannels()).map(String);
  check(`${tag} PUBSUB CHANNELS`, JSON.stringify(channels) === '["news"]', channels);
  const numsub = await client.pubSubNumSub(["news", "none"]);
  const counts = numsub instanceof Map ? Object.fromEntries(numsub) : numsub;
  check(`${tag} PUBSUB NUMSUB`, counts.news === 1 && counts.none === 0, counts);
  const numpat = await client.pubSubNumPat();
  check(`${tag} PUBSUB NUMPAT`, numpat === 1, numpat);

  await client.configSet("notify-keyspace-events", "KEA");
  await subscriber.pSubscribe("__keyevent@0__:*", box.listener("keyevent"));
  const key = `bf-node-${tag}`;
  const added = await client.bf.add(key, "item");
  check(`${tag} BF.ADD`, added === true || added === 1, added);
  const events = await box.take(1);
  check(
    `${tag} keyevent from BF.ADD`,
    JSON.stringify(events) === JSON.stringify([["keyevent", "__keyevent@0__:bloom.add", key]]),
    events,
  );
  await client.configSet("notify-keyspace-events", "");

  await subscriber.unsubscribe("news");
  await subscriber.pUnsubscribe();
  const after = await client.publish("news", "again");
  check(`${tag} nobody subscribed after unsubscribe`, after === 0, after);
  const left = await client.pubSubNumPat();
  check(`${tag} no pattern left`, left === 0, left);

  await subscriber.quit();
  await client.quit();
}

async function main() {
  const port = Number(process.argv[2]);
  await run(port, 2);
  await run(port, 3);
  if (failures.length) {
    console.log(`${failures.length} failure(s)`);
    process.exit(1);
  }
  console.log("all node-redis pub/sub checks passed");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
