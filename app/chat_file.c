/* app/chat_file.c — nibble chat's conversations as JSON files (chat_file.h). */
#include "app/chat_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/text.h"

#define FILE_MAX ((size_t)64 << 20) /* a conversation file read at most */

int app_chat_save(const char *path, const struct nb_chat_msg *msgs, int n)
{
    cJSON *list = cJSON_CreateArray();
    char *json = NULL;
    int ok = 0;
    for (int i = 0; list && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddItemToArray(list, m) ||
            !cJSON_AddStringToObject(m, "role", msgs[i].role) ||
            !cJSON_AddStringToObject(m, "content", msgs[i].content))
            goto done;
    }
    if (!list || !(json = cJSON_Print(list))) goto done;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nibble chat: /save %s: %s\n", path, strerror(errno));
        goto done;
    }
    int bad = fputs(json, f) == EOF || fputc('\n', f) == EOF;
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "nibble chat: /save %s: %s\n", path, strerror(errno));
        goto done;
    }
    ok = 1;
done:
    if (!ok && !json) fprintf(stderr, "nibble chat: /save: out of memory\n");
    free(json);
    cJSON_Delete(list);
    return ok;
}

/* The role a message of a loaded conversation must have at index i (after `sys`, 0 or 1
 * system messages): the literal, or NULL for an unknown role. *why when it is out of turn. */
static const char *check_role(const char *role, int i, int sys, const char **why)
{
    static const char *const roles[] = {"system", "user", "assistant"};
    for (int k = 0; k < 3; k++) {
        if (strcmp(role, roles[k])) continue;
        if (k == 0 ? i != 0 : (i - sys) % 2 != k - 1)
            *why = k == 0 ? "a system message only comes first"
                          : "user and assistant messages take turns, the user's first";
        return roles[k];
    }
    *why = "the role is not system, user or assistant";
    return NULL;
}

/* The messages of the parsed file into roles/contents: 1, or 0 with *why. */
static int take_messages(const cJSON *list, int max, const char **roles, char **contents,
                         int *n, const char **why)
{
    int count = cJSON_GetArraySize(list), sys = 0;
    if (count > max) {
        *why = "too many messages";
        return 0;
    }
    for (int i = 0; i < count; i++) {
        const cJSON *m = cJSON_GetArrayItem(list, i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role) || !cJSON_IsString(content)) {
            *why = "a message is not an object with a string role and content";
            return 0;
        }
        roles[i] = check_role(role->valuestring, i, sys, why);
        if (!roles[i] || *why) return 0;
        sys |= i == 0 && !strcmp(roles[i], "system");
        if (!(contents[i] = strdup(content->valuestring))) {
            *why = "out of memory";
            return 0;
        }
        (*n)++;
    }
    if (count > sys && strcmp(roles[count - 1], "assistant")) {
        *why = "the last message is not the assistant's";
        return 0;
    }
    return 1;
}

int app_chat_load(const char *path, int max, const char **roles, char **contents, int *n)
{
    char *text = NULL;
    size_t len = 0;
    const char *why = NULL;
    *n = 0;
    if (!app_read_all("chat", "/load", path, FILE_MAX, &text, &len)) return 0;
    cJSON *root = cJSON_ParseWithLength(text, len);
    const cJSON *list = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "messages")
                                             : root;
    if (!root) why = "not JSON";
    else if (!cJSON_IsArray(list)) why = "not an array of messages (nor {\"messages\": [...]})";
    else take_messages(list, max, roles, contents, n, &why);
    cJSON_Delete(root);
    free(text);
    if (!why) return 1;
    fprintf(stderr, "nibble chat: /load %s: %s; the conversation is unchanged\n", path, why);
    for (int i = 0; i < *n; i++) free(contents[i]);
    *n = 0;
    return 0;
}
