/* The module API's floor: what any Redis module's BF.ADD / BF.EXISTS / CF.ADD / CF.EXISTS /
 * BF.MADD / BF.MEXISTS / CF.MEXISTS costs before its filter does any work.
 *
 * Built and loaded by `scripts/bench/redisbloom_bench.py --floor` (cc -shared against the
 * redismodule.h that the redis-module crate ships). It registers the four commands under the
 * same names and flags as bloomgate's module, with the module API calls a correct
 * implementation cannot avoid and nothing else:
 *
 *   ADD:    OpenKey(READ|WRITE), ModuleTypeGetType + ModuleTypeGetValue (KeyType and a new
 *           value only on a key that is not ours), the item's bytes, ReplyWithLongLong,
 *           CloseKey; CF.ADD also ReplicateVerbatim (every CF.ADD inserts, so it must reach replicas and the
 *           AOF). BF.ADD never replicates here: a module need not replicate an item that was
 *           already present (bloomgate does not; RedisBloom does), and the benchmark's adds are
 *           mostly repeats (-r 100000), so leaving it out keeps this a lower bound.
 *   EXISTS: OpenKey(READ), the same type check and value, the item's bytes,
 *           ReplyWithLongLong, CloseKey.
 *   MEXISTS (BF and CF) and BF.MADD: the same, for every item: each item's bytes and one
 *           ReplyWithLongLong inside one ReplyWithArray. BF.MADD also ReplicateVerbatim (a
 *           batch of 120 mostly-new items always inserts something). With 120 items per call
 *           (scripts/bench/scale_bench.py) this is the floor under the seed's batches.
 *
 * The "filter" is one counter bumped per call, so every server-side microsecond and every
 * instruction counted here is the host's. A module whose per-call cost is to be X times
 * RedisBloom's must fit its own work (hashing, probes, scaling checks) into
 * X * RedisBloom's cost minus this floor. BF.RESERVE / CF.RESERVE create the value (the
 * benchmark's setup). Never loaded in production: it has no RDB support.
 */
#define REDISMODULE_MAIN
#include "redismodule.h"

#include <stdint.h>

static RedisModuleType *FloorType;

typedef struct {
    uint64_t touched;
    uint64_t last_len;
} Floor;

static void floor_free(void *value) { RedisModule_Free(value); }

/* Opens argv[1] in `mode`; returns its value, creating it on an empty key when `create`.
 * NULL (with the reply sent) on a key of another type, or a missing one. */
static Floor *floor_value(RedisModuleCtx *ctx, RedisModuleKey *key, int create) {
    /* The module type first: a key of ours costs two calls (as in bloomgate's module). */
    if (RedisModule_ModuleTypeGetType(key) == FloorType) return RedisModule_ModuleTypeGetValue(key);
    int type = RedisModule_KeyType(key);
    if (type == REDISMODULE_KEYTYPE_EMPTY) {
        if (!create) {
            RedisModule_ReplyWithLongLong(ctx, 0);
            return NULL;
        }
        Floor *value = RedisModule_Calloc(1, sizeof(Floor));
        RedisModule_ModuleTypeSetValue(key, FloorType, value);
        return value;
    }
    RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    return NULL;
}

static int floor_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int replicate) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    Floor *value = floor_value(ctx, key, 1);
    if (value) {
        size_t len;
        RedisModule_StringPtrLen(argv[2], &len);
        value->touched++;
        value->last_len = len;
        RedisModule_ReplyWithLongLong(ctx, 1);
        if (replicate) RedisModule_ReplicateVerbatim(ctx);
    }
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

static int floor_bf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return floor_add(ctx, argv, argc, 0);
}

static int floor_cf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return floor_add(ctx, argv, argc, 1);
}

static int floor_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    Floor *value = floor_value(ctx, key, 0);
    if (value) {
        size_t len;
        RedisModule_StringPtrLen(argv[2], &len);
        RedisModule_ReplyWithLongLong(ctx, (long long)((value->touched + len) & 1));
    }
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

/* MEXISTS / MADD: one reply per item, in one array. */
static int floor_many(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int write) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    int mode = write ? REDISMODULE_READ | REDISMODULE_WRITE : REDISMODULE_READ;
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], mode);
    Floor *value = floor_value(ctx, key, write);
    if (value) {
        RedisModule_ReplyWithArray(ctx, argc - 2);
        for (int i = 2; i < argc; i++) {
            size_t len;
            RedisModule_StringPtrLen(argv[i], &len);
            if (write) value->touched++;
            RedisModule_ReplyWithLongLong(ctx, (long long)((value->touched + len) & 1));
        }
        if (write) RedisModule_ReplicateVerbatim(ctx);
    }
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

static int floor_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return floor_many(ctx, argv, argc, 0);
}

static int floor_madd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return floor_many(ctx, argv, argc, 1);
}

static int floor_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    if (floor_value(ctx, key, 1)) {
        RedisModule_ReplyWithSimpleString(ctx, "OK");
        RedisModule_ReplicateVerbatim(ctx);
    }
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    RedisModuleTypeMethods methods = {.version = REDISMODULE_TYPE_METHOD_VERSION,
                                      .free = floor_free};
    FloorType = RedisModule_CreateDataType(ctx, "bg-floor1", 0, &methods);
    if (FloorType == NULL) return REDISMODULE_ERR;
    struct {
        const char *name;
        RedisModuleCmdFunc fn;
        const char *flags;
    } commands[] = {
        {"bf.add", floor_bf_add, "write deny-oom"},
        {"bf.exists", floor_exists, "readonly fast"},
        {"cf.add", floor_cf_add, "write deny-oom"},
        {"cf.exists", floor_exists, "readonly fast"},
        {"bf.mexists", floor_mexists, "readonly fast"},
        {"cf.mexists", floor_mexists, "readonly fast"},
        {"bf.madd", floor_madd, "write deny-oom"},
        {"bf.reserve", floor_reserve, "write deny-oom"},
        {"cf.reserve", floor_reserve, "write deny-oom"},
    };
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (RedisModule_CreateCommand(ctx, commands[i].name, commands[i].fn, commands[i].flags, 1,
                                      1, 1) == REDISMODULE_ERR)
            return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
