"""`ddconsole completion bash|zsh|fish`: print a shell completion script.

The scripts ask `ddconsole __complete SHELL -- WORD...` (a hidden verb) for candidates, so
completion follows the parser as it is, plus the profiles, layouts, variants, server ids and
run ids on disk. The hidden verb never prints a traceback: any error means no candidates.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

SHELLS = ("bash", "zsh", "fish")
HIDDEN_VERB = "__complete"

BASH = r"""# ddconsole completion for bash: eval "$(ddconsole completion bash)"
_ddconsole_complete() {
    local cur="${COMP_WORDS[COMP_CWORD]}" cmd="${COMP_WORDS[0]}" line
    command -v -- "$cmd" >/dev/null 2>&1 || cmd=__PROGRAM__
    local IFS=$'\n'
    local -a answers
    answers=($("$cmd" __complete bash -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
    COMPREPLY=()
    for line in "${answers[@]}"; do
        case "$line" in
            __files__) COMPREPLY+=($(compgen -f -- "$cur")) ;;
            __dirs__) COMPREPLY+=($(compgen -d -- "$cur")) ;;
            *) COMPREPLY+=("$line") ;;
        esac
    done
}
complete -F _ddconsole_complete ddconsole
"""

ZSH = r"""#compdef ddconsole
# ddconsole completion for zsh: save as _ddconsole in a folder on $fpath (before compinit),
# or eval "$(ddconsole completion zsh)" after compinit.
_ddconsole() {
    local cmd="${words[1]}" line
    (( $+commands[$cmd] )) || [[ -x "$cmd" ]] || cmd=__PROGRAM__
    local -a answers values
    answers=("${(@f)$("$cmd" __complete zsh -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    for line in "${answers[@]}"; do
        case "$line" in
            __files__) _files ;;
            __dirs__) _files -/ ;;
            ?*) values+=("$line") ;;
        esac
    done
    (( ${#values} )) && compadd -Q -- "${values[@]}"
    return 0
}
if [[ "${funcstack[1]}" == "_ddconsole" ]]; then
    _ddconsole "$@"
else
    compdef _ddconsole ddconsole
fi
"""

FISH = r"""# ddconsole completion for fish: ddconsole completion fish | source
function __ddconsole_complete
    set -l cmd (commandline -opc)[1]
    type -q -- $cmd; or set cmd __PROGRAM__
    set -l words (commandline -opc)[2..-1] (commandline -ct)
    for line in ($cmd __complete fish -- $words 2>/dev/null)
        switch $line
            case __files__
                __fish_complete_path (commandline -ct)
            case __dirs__
                __fish_complete_directories (commandline -ct)
            case '*'
                echo $line
        end
    end
end
complete -c ddconsole -f -a '(__ddconsole_complete)'
"""

SCRIPTS = {"bash": BASH, "zsh": ZSH, "fish": FISH}


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    completion = verbs.add_parser(
        "completion",
        parents=[common],
        help="print a shell completion script (bash, zsh or fish)",
        description="Prints a script that completes ddconsole's verbs, flags, profiles, "
        "layouts, variants, server ids and run ids. bash: add "
        '`eval "$(ddconsole completion bash)"` to ~/.bashrc; zsh: '
        '`eval "$(ddconsole completion zsh)"` after compinit in ~/.zshrc; fish: '
        "`ddconsole completion fish > ~/.config/fish/completions/ddconsole.fish`.",
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    completion.set_defaults(handler=_script)

    # Hidden (no help): the scripts' helper. Every word after it is the user's, `--help`
    # and `--demo` included, so it has no options of its own.
    helper = verbs.add_parser(HIDDEN_VERB, add_help=False, prefix_chars="\x00")
    helper.add_argument("words", nargs=argparse.REMAINDER)
    helper.set_defaults(handler=_complete)


def _program() -> str:
    """This ddconsole, for a script run where `ddconsole` is not on PATH."""
    path = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if path and os.path.isfile(path) and os.access(path, os.X_OK):
        return shlex.quote(path)
    return "ddconsole"


def _script(args: argparse.Namespace) -> int:
    sys.stdout.write(SCRIPTS[args.shell].replace("__PROGRAM__", _program()))
    return 0


def _complete(args: argparse.Namespace) -> int:
    words = list(args.words)
    if words[:1] in (["bash"], ["zsh"], ["fish"]):
        words = words[1:]
    if words[:1] == ["--"]:
        words = words[1:]
    try:
        from console.cli.complete import candidates
        from console.cli.parser import build_parser

        found = candidates(build_parser(), words or [""])
        sys.stdout.write("".join(f"{line}\n" for line in found))
    except Exception:  # completion must never show a traceback; nothing is offered instead
        return 0
    return 0
