# bash completion for nibble (installed as share/bash-completion/completions/nibble).
# The commands and each command's options are read from nibble's own help (`nibble
# --help`, `nibble CMD --help`) when first asked for, so this file never lists them and
# cannot fall behind the program. Source it by hand to try: . tools/nibble-completion.bash

_nibble_commands() {
    "${1:-nibble}" --help 2>/dev/null | awk '/^  [a-z][a-z-]*  /{print $1}'
    echo help version
}

# The options a command's usage names ("-m, --model PATH", "--temp T", "[--json]").
_nibble_options() {
    "$1" "$2" --help 2>/dev/null | grep -oE '(^|[][ ,(|])--?[A-Za-z][A-Za-z0-9_-]*' |
        sed -E 's/^[][ ,(|]//' | grep -vx -- --option | sort -u
}

_nibble() {
    local cur prev bin cmd i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    bin=${COMP_WORDS[0]}
    cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do # the first word that is not a global option
        case ${COMP_WORDS[i]} in
        --log-format) ((i++)) ;;
        -*) ;;
        *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    case $prev in
    -m | --model | -f | --file | --grammar-file | --chat-template-file | -o | --out | --output-file)
        COMPREPLY=($(compgen -f -- "$cur"))
        return ;;
    --path) COMPREPLY=($(compgen -W "auto w4a8 w4a16 w8a16 bf16 f32 source" -- "$cur")); return ;;
    --priority) COMPREPLY=($(compgen -W "balanced speed fidelity memory" -- "$cur")); return ;;
    --target) COMPREPLY=($(compgen -W "host arm phone" -- "$cur")); return ;;
    --kv-type | -ctk | -ctv | --cache-type-k | --cache-type-v)
        COMPREPLY=($(compgen -W "f16 f32 bf16 q8_0" -- "$cur"))
        return ;;
    --chat-template) COMPREPLY=($(compgen -W "chatml qwen3 llama3 llama2 gemma" -- "$cur")); return ;;
    --log-format) COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
    -fa | --flash-attn) COMPREPLY=($(compgen -W "on off auto" -- "$cur")); return ;;
    esac
    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "-h --help --version -q --quiet -v --verbose --log-disable --log-format" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$(_nibble_commands "$bin")" -- "$cur"))
        fi
        return
    fi
    case $cmd in
    help) COMPREPLY=($(compgen -W "$(_nibble_commands "$bin")" -- "$cur")); return ;;
    cache)
        if [[ $cur != -* ]]; then COMPREPLY=($(compgen -W "list clear dir" -- "$cur")); return; fi ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_nibble_options "$bin" "$cmd") -q --quiet -v --verbose --log-disable --log-format" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -o filenames -F _nibble nibble
