#!/usr/bin/env python3
# Writes a large RDB file (RDB version 10) from the RedisBloom fixture: COPIES copies of its nine
# BF/CF values under new keys plus one string per copy, for timing `bloomgate import-rdb`.
# Usage: scripts/make_redisbloom_rdb.py COPIES OUT.rdb
import json, os, sys
d = json.load(open(os.path.join(os.path.dirname(__file__), '..', 'tests', 'fixtures', 'redisbloom-rdb', 'expected.json')))
copies = int(sys.argv[1]); out = sys.argv[2]
def enc_len(n):
    if n < 64: return bytes([n])
    if n < 16384: return bytes([0x40 | (n >> 8), n & 0xff])
    return b'\x80' + n.to_bytes(4, 'big')
def enc_str(s): return enc_len(len(s)) + s
with open(out, 'wb') as f:
    f.write(b'REDIS0010\xfe\x00')
    for i in range(copies):
        for k, v in d['keys'].items():
            p = bytes.fromhex(v['dump_payload_hex'])
            f.write(p[:1] + enc_str(f'{k}:{i}'.encode()) + p[1:-10])
        f.write(b'\x00' + enc_str(f'str:{i}'.encode()) + enc_str(b'hello world'))
    f.write(b'\xff' + b'\x00' * 8)
