/* A small JSON reader for the tests that check files the library writes
 * (traces): a strict parser into a tree, and lookups. Not for production:
 * it allocates freely and stops at the first error. */
#ifndef VAT_TEST_JSON_H
#define VAT_TEST_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
  JSON_NULL,
  JSON_BOOL,
  JSON_NUMBER,
  JSON_STRING,
  JSON_ARRAY,
  JSON_OBJECT
} json_type;

typedef struct json json;
struct json {
  json_type type;
  bool boolean;
  double number;
  char *string; /* JSON_STRING */
  size_t len;   /* items of an array or object */
  json *items;  /* array items, object values */
  char **keys;  /* object keys */
};

/** The document in `text`, or NULL with a message in `err`: a syntax
 *  error, or anything after the value but white space. */
json *json_parse(const char *text, char *err, size_t err_size);
/** Reads and parses a file; NULL with a message on any error. */
json *json_parse_file(const char *path, char *err, size_t err_size);
void json_free(json *v);

/** Member `key` of an object, or NULL (also when `obj` is not one). */
const json *json_get(const json *obj, const char *key);
/** Member `key` as a number or string, or the fallback. */
double json_num(const json *obj, const char *key, double fallback);
const char *json_str(const json *obj, const char *key);

#endif
