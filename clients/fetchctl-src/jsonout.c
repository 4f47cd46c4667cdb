/* JSON written as jq 1.6 writes it (the old client printed every answer through jq): two
 * spaces of indent, "key": value, numbers in their shortest round-trip form, exponents as jq
 * chooses them, control characters and DEL escaped, everything else as it is. */
#define _GNU_SOURCE
#include "fetchctl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void write_string(buf *b, const char *s, size_t len) {
    buf_addc(b, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': buf_adds(b, "\\\""); break;
        case '\\': buf_adds(b, "\\\\"); break;
        case '\b': buf_adds(b, "\\b"); break;
        case '\f': buf_adds(b, "\\f"); break;
        case '\n': buf_adds(b, "\\n"); break;
        case '\r': buf_adds(b, "\\r"); break;
        case '\t': buf_adds(b, "\\t"); break;
        default:
            if (c < 0x20 || c == 0x7f)
                buf_addf(b, "\\u%04x", c);
            else
                buf_addc(b, (char)c);
        }
    }
    buf_addc(b, '"');
}

/* The shortest digits that read back as v, placed as jq's dtoa formatting places them:
 * plain notation unless the decimal point would be more than 5 places past the digits or
 * the number is below 1e-4. */
static void write_real(buf *b, double v) {
    if (isnan(v)) {
        buf_adds(b, "null");
        return;
    }
    if (isinf(v)) {
        buf_adds(b, v > 0 ? "1.7976931348623157e+308" : "-1.7976931348623157e+308");
        return;
    }
    if (v == 0) {
        buf_adds(b, signbit(v) ? "-0" : "0");
        return;
    }
    char text[64];
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(text, sizeof text, "%.*e", precision - 1, v);
        if (strtod(text, NULL) == v)
            break;
    }
    /* text: [-]d[.ddd]e[+-]XX */
    const char *p = text;
    int negative = *p == '-';
    if (negative)
        p++;
    char digits[32];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    int exponent = atoi(p + 1);
    int decpt = exponent + 1;   /* digits d1 d2 ... with the point after decpt of them */
    if (negative)
        buf_addc(b, '-');
    if (decpt <= -4 || decpt > (int)nd + 5) {
        buf_addc(b, digits[0]);
        if (nd > 1) {
            buf_addc(b, '.');
            buf_adds(b, digits + 1);
        }
        buf_addf(b, "e%c%02d", exponent < 0 ? '-' : '+', abs(exponent));
    } else if (decpt <= 0) {
        buf_adds(b, "0.");
        for (int i = decpt; i < 0; i++)
            buf_addc(b, '0');
        buf_adds(b, digits);
    } else if (decpt >= (int)nd) {
        buf_adds(b, digits);
        for (int i = (int)nd; i < decpt; i++)
            buf_addc(b, '0');
    } else {
        buf_add(b, digits, (size_t)decpt);
        buf_addc(b, '.');
        buf_adds(b, digits + decpt);
    }
}

static void indent(buf *b, int level) {
    buf_addc(b, '\n');
    for (int i = 0; i < level; i++)
        buf_adds(b, "  ");
}

static void write_value(buf *b, json_t *v, int pretty, int level);

/* An object's members, separated by sep (pretty: each on its own indented line). */
static void write_members(buf *b, json_t *obj, int pretty, int level, const char *sep) {
    const char *key;
    json_t *member;
    int first = 1;
    json_object_foreach(obj, key, member) {
        if (!first)
            buf_adds(b, sep);
        first = 0;
        if (pretty)
            indent(b, level + 1);
        write_string(b, key, strlen(key));
        buf_adds(b, pretty ? ": " : ":");
        write_value(b, member, pretty, level + 1);
    }
}

static void write_value(buf *b, json_t *v, int pretty, int level) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        if (json_object_size(v) == 0) {
            buf_adds(b, "{}");
            break;
        }
        buf_addc(b, '{');
        write_members(b, v, pretty, level, ",");
        if (pretty)
            indent(b, level);
        buf_addc(b, '}');
        break;
    case JSON_ARRAY: {
        if (json_array_size(v) == 0) {
            buf_adds(b, "[]");
            break;
        }
        buf_addc(b, '[');
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) {
            if (i)
                buf_addc(b, ',');
            if (pretty)
                indent(b, level + 1);
            write_value(b, item, pretty, level + 1);
        }
        if (pretty)
            indent(b, level);
        buf_addc(b, ']');
        break;
    }
    case JSON_STRING:
        write_string(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        buf_addf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        write_real(b, json_real_value(v));
        break;
    case JSON_TRUE: buf_adds(b, "true"); break;
    case JSON_FALSE: buf_adds(b, "false"); break;
    case JSON_NULL: buf_adds(b, "null"); break;
    }
}

void json_write_lines(buf *b, json_t *obj) {
    buf_addc(b, '{');
    write_members(b, obj, 0, 0, ",\n");
    buf_adds(b, "\n}");
}

void json_write(buf *b, json_t *v, int pretty) {
    if (!v)
        buf_adds(b, "null");
    else
        write_value(b, v, pretty, 0);
}
