/* tests/test_json.c — nb_json_parse / nb_json_load and the typed getters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "formats/json.h"

static cJSON *parse_ok(const char *text)
{
    cJSON *j = NULL;
    assert_int_equal(nb_json_parse(text, strlen(text), "t.json", &j), NB_OK);
    assert_non_null(j);
    return j;
}

static void test_parse_ok(void **state)
{
    (void)state;
    cJSON *j = parse_ok("{\"a\": 1, \"b\": [true, null], \"c\": \"x\"}  \n");
    assert_true(cJSON_IsObject(j));
    cJSON_Delete(j);
    /* Not NUL-terminated: only `len` bytes are read. */
    const char buf[] = {'[', '1', ']', 'x'};
    cJSON *k = NULL;
    assert_int_equal(nb_json_parse(buf, 3, "b", &k), NB_OK);
    assert_true(cJSON_IsArray(k));
    cJSON_Delete(k);
}

static void test_syntax_error_line_col(void **state)
{
    (void)state;
    cJSON *j = (cJSON *)1;
    const char *text = "{\n  \"a\": 1,\n  \"b\": ]\n}";
    assert_int_equal(nb_json_parse(text, strlen(text), "cfg.json", &j), NB_ERR_FORMAT);
    assert_null(j);
    const char *msg = nb_last_error();
    assert_non_null(strstr(msg, "cfg.json:3:8:"));

    /* Trailing garbage, empty input, truncation, embedded NUL. */
    assert_int_equal(nb_json_parse("{} x", 4, "g.json", &j), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "g.json:1:4:"));
    assert_int_equal(nb_json_parse("", 0, "e.json", &j), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "e.json:1:1:"));
    assert_int_equal(nb_json_parse("{\"a\":", 5, "t.json", &j), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "t.json:1:"));
    assert_int_equal(nb_json_parse("{}\0{}", 5, "n.json", &j), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "NUL"));
}

static void test_load(void **state)
{
    (void)state;
    char path[] = "/tmp/nb_test_json_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "{\"n\": 42}\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    cJSON *j = NULL;
    assert_int_equal(nb_json_load(path, &j), NB_OK);
    int64_t n = 0;
    assert_int_equal(nb_json_get_int(j, "n", 0, &n, path), NB_OK);
    assert_int_equal(n, 42);
    cJSON_Delete(j);
    unlink(path);
    assert_int_equal(nb_json_load("/nonexistent/x.json", &j), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "/nonexistent/x.json"));
}

static void test_getters(void **state)
{
    (void)state;
    cJSON *j = parse_ok("{\"i\": 7, \"neg\": -3, \"f\": 1.5, \"big\": 1e30, \"b\": true, "
                        "\"s\": \"hi\", \"z\": null, \"max\": 9007199254740992}");
    int64_t i = 0;
    double d = 0;
    int b = 0;
    const char *s = NULL;
    assert_int_equal(nb_json_get_int(j, "i", 0, &i, "c.json"), NB_OK);
    assert_int_equal(i, 7);
    assert_int_equal(nb_json_get_int(j, "neg", 0, &i, "c.json"), NB_OK);
    assert_int_equal(i, -3);
    assert_int_equal(nb_json_get_int(j, "max", 0, &i, "c.json"), NB_OK);
    assert_int_equal(i, 9007199254740992LL);
    assert_int_equal(nb_json_get_int(j, "missing", 5, &i, "c.json"), NB_OK);
    assert_int_equal(i, 5);

    assert_int_equal(nb_json_get_int(j, "f", 0, &i, "c.json"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "'f'"));
    assert_non_null(strstr(nb_last_error(), "c.json"));
    assert_int_equal(nb_json_get_int(j, "big", 0, &i, "c.json"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "'big'"));
    assert_int_equal(nb_json_get_int(j, "s", 0, &i, "c.json"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "'s'"));

    assert_int_equal(nb_json_get_num(j, "f", 0, &d, "c.json"), NB_OK);
    assert_true(d == 1.5);
    assert_int_equal(nb_json_get_num(j, "none", 2.5, &d, "c.json"), NB_OK);
    assert_true(d == 2.5);
    assert_int_equal(nb_json_get_num(j, "b", 0, &d, "c.json"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "'b'"));

    assert_int_equal(nb_json_get_bool(j, "b", 0, &b, "c.json"), NB_OK);
    assert_int_equal(b, 1);
    assert_int_equal(nb_json_get_bool(j, "nope", 1, &b, "c.json"), NB_OK);
    assert_int_equal(b, 1);
    assert_int_equal(nb_json_get_bool(j, "i", 0, &b, "c.json"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "'i'"));

    assert_int_equal(nb_json_get_str(j, "s", NULL, &s, "c.json"), NB_OK);
    assert_string_equal(s, "hi");
    assert_int_equal(nb_json_get_str(j, "q", "dflt", &s, "c.json"), NB_OK);
    assert_string_equal(s, "dflt");
    assert_int_equal(nb_json_get_str(j, "z", NULL, &s, "c.json"), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "'z'"));

    /* Looking up in a non-object is a format error, in NULL gives the default. */
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "i");
    assert_int_equal(nb_json_get_int(arr, "x", 0, &i, "c.json"), NB_ERR_FORMAT);
    assert_int_equal(nb_json_get_int(NULL, "x", 9, &i, "c.json"), NB_OK);
    assert_int_equal(i, 9);
    cJSON_Delete(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_syntax_error_line_col),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_getters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
