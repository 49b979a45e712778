// node-redis against `bloomgate serve --gate-store URL`: GATE.UNSEEN / GATE.RECORD / GATE.INFO
// through the client's sendCommand, a short feed with 0 duplicates, and the errors a client gets.
// Usage: node gate_node_test.js PORT   (node-redis found through NODE_PATH)
"use strict";
const { createClient } = require("redis");

async function main() {
  const port = Number(process.argv[2]);
  const client = createClient({ socket: { host: "127.0.0.1", port } });
  client.on("error", (e) => console.error("client error", e));
  await client.connect();
  const failures = [];
  const check = (name, ok, detail) => {
    console.log(`${ok ? "ok  " : "FAIL"} ${name}${ok ? "" : ": " + JSON.stringify(detail)}`);
    if (!ok) failures.push(name);
  };

  const first = await client.sendCommand(["GATE.UNSEEN", "node:user", "a", "b", "c"]);
  check("unseen before", JSON.stringify(first) === "[1,1,1]", first);
  const taken = await client.sendCommand(["GATE.RECORD", "node:user", "a", "c"]);
  check("record answers the count", taken === 2, taken);
  const after = await client.sendCommand(["GATE.UNSEEN", "node:user", "a", "b", "c"]);
  check("unseen after", JSON.stringify(after) === "[0,1,0]", after);

  // A short feed: 20 users, 200 requests of 120 candidates, 20 recorded per request.
  const shown = new Map();
  let duplicates = 0;
  let next = 0;
  for (let i = 0; i < 200; i++) {
    const user = `node:${i % 20}`;
    const history = shown.get(user) || [];
    const candidates = [];
    for (let c = 0; c < 120; c++) {
      if (history.length && c % 50 === 0) candidates.push(history[(i * 7 + c) % history.length]);
      else candidates.push(`item:${++next}`);
    }
    const verdict = await client.sendCommand(["GATE.UNSEEN", user, ...candidates]);
    const seen = new Set(history);
    const unseen = candidates.filter((_, k) => verdict[k] === 1);
    duplicates += unseen.filter((c) => seen.has(c)).length;
    const pick = [...new Set(unseen)].slice(0, 20);
    if (pick.length) {
      const n = await client.sendCommand(["GATE.RECORD", user, ...pick]);
      history.push(...pick.slice(0, n));
    }
    shown.set(user, history);
  }
  check("feed: 0 duplicates", duplicates === 0, duplicates);

  const info = await client.sendCommand(["GATE.INFO"]);
  const fields = {};
  for (let k = 0; k + 1 < info.length; k += 2) fields[String(info[k])] = info[k + 1];
  check("info policy", String(fields.policy) === "verify", fields.policy);
  check("info requests", fields.requests >= 202, fields.requests);

  let error = "";
  try {
    await client.sendCommand(["GATE.UNSEEN", "node:user"]);
  } catch (e) {
    error = String(e.message || e);
  }
  check("arity error", error.includes("wrong number of arguments"), error);
  await client.quit();
  if (failures.length) process.exit(1);
  console.log("node-redis gate test: ok");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
