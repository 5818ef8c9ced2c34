// `yardctl completion bash|zsh`: a shell completion script generated from yardctl's own
// command tree (so it offers exactly the commands and flags this binary has), and the
// hidden `yardctl __complete jobs|queues|nodes|datasets` the script runs for live names.
//
// What a positional argument or an option's value completes to comes from the tree too: a
// type name JOB, QUEUE, NODE or DATASET (set with CLI11's type_name(), which help shows as
// well) asks the master for those names, FILE completes file names, and an IsMember check
// ({a,b,c}) offers its members. Other values complete to nothing.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/util/json.h"
#include "master/yardctl/cli.h"
#include "master/yardctl/client.h"
#include "master/yardctl/report.h"
#include "yard/version.h"

namespace yard::ctl {
namespace {

// The command tree as the scripts need it, keyed by command path ("." for yardctl itself,
// "job", "job list").
struct CompletionTree {
  std::map<std::string, std::vector<std::string>> subcommands;
  std::map<std::string, std::vector<std::string>> flags;   // every option name, valued or not
  std::map<std::string, std::vector<std::string>> valued;  // the options that take a value
  std::map<std::string, std::string> values;               // "PATH|OPTION" -> a kind (below)
  std::map<std::string, std::vector<std::string>> args;    // positional kinds in order
};

// A shell-safe word: names, flags and choices are made of these; anything else is left out
// rather than quoted, so no generated script can run a word as code.
bool safeWord(const std::string& w) {
  if (w.empty()) return false;
  for (char c : w)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("_.:,/=+-").find(c) == std::string_view::npos)
      return false;
  return true;
}

// What a value completes to: jobs, queues, nodes, datasets (live), files, choices:a,b,c, or
// "-" (nothing).
std::string valueKind(const CLI::Option* opt) {
  std::string type = opt->get_type_name();
  std::string base = type.substr(0, type.find(':'));
  if (base == "JOB") return "jobs";
  if (base == "QUEUE") return "queues";
  if (base == "NODE") return "nodes";
  if (base == "DATASET") return "datasets";
  if (base == "FILE") return "files";
  size_t open = type.find('{'), close = type.rfind('}');
  if (open != std::string::npos && close != std::string::npos && close > open + 1) {
    std::string choices = type.substr(open + 1, close - open - 1);
    if (safeWord(choices)) return "choices:" + choices;
  }
  return "-";
}

void describe(const CLI::App& app, const std::string& path, const CLI::App& root, CompletionTree& tree) {
  std::string key = path.empty() ? "." : path;
  // `inherited`: one of the root's options, whose value kinds the walk looks up under ".".
  auto addOption = [&](const CLI::Option* opt, bool inherited) {
    std::vector<std::string> names;
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    bool takesValue = opt->get_expected_max() != 0;
    for (const auto& n : names) {
      if (!safeWord(n)) continue;
      tree.flags[key].push_back(n);
      if (!takesValue) continue;
      tree.valued[key].push_back(n);
      std::string kind = valueKind(opt);
      if (kind != "-" && !inherited) tree.values[key + "|" + n] = kind;
    }
  };
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_positional() && !opt->nonpositional()) {
      std::string kind = valueKind(opt);
      if (opt->get_items_expected_max() > 1) kind += "...";  // FILE...: every further word
      tree.args[key].push_back(kind);
    } else {
      addOption(opt, false);
    }
  }
  // The root's options that take a value (--master, -o) may follow any subcommand.
  if (&app != &root)
    for (const CLI::Option* opt : root.get_options())
      if (opt->nonpositional() && opt->get_expected_max() != 0) addOption(opt, true);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
    if (!safeWord(sub->get_name())) continue;
    tree.subcommands[key].push_back(sub->get_name());
    describe(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), root, tree);
  }
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// One associative array: bash's `[key]='value'` or zsh's `key 'value'` pairs.
template <typename Map, typename Text>
void assocArray(std::ostream& out, bool zsh, const char* name, const Map& map, Text text) {
  out << name << "=(\n";
  for (const auto& [key, value] : map) {
    if (zsh) out << "  '" << key << "' '" << text(value) << "'\n";
    else out << "  ['" << key << "']='" << text(value) << "'\n";
  }
  out << ")\n";
}

void tables(std::ostream& out, const CompletionTree& tree, bool zsh) {
  out << (zsh ? "typeset -gA" : "declare -gA")
      << " _yardctl_subs _yardctl_flags _yardctl_valued _yardctl_values _yardctl_args\n";
  assocArray(out, zsh, "_yardctl_subs", tree.subcommands, joined);
  assocArray(out, zsh, "_yardctl_flags", tree.flags, joined);
  assocArray(out, zsh, "_yardctl_valued", tree.valued, joined);
  assocArray(out, zsh, "_yardctl_values", tree.values, [](const std::string& s) { return s; });
  assocArray(out, zsh, "_yardctl_args", tree.args, joined);
}

// The walk over the words typed so far, shared by both shells (their syntax agrees on it):
// finds the command path, how many positionals were given, --master, and whether the word
// being completed is an option's value. $first is the first word after the command, $cword
// the index of the one being completed, and W the words' array.
const char* kWalk = R"(  local cmdpath="" w="" valueof="" master="" kind="" key="."
  local -i i npos=0
  for (( i = first; i < cword; i++ )); do
    w=${W[i]}
    case $w in
      --master=*) master=${w#*=} ;;
      -*)
        if [[ $w != *=* && " ${_yardctl_valued[$key]} " == *" $w "* ]]; then
          if (( i + 1 == cword )); then valueof=$w
          else
            [[ $w == --master ]] && master=${W[i+1]}
            (( i++ ))
          fi
        fi ;;
      *)
        if (( npos == 0 )) && [[ " ${_yardctl_subs[$key]} " == *" $w "* ]]; then
          cmdpath=${cmdpath:+$cmdpath }$w
          key=$cmdpath
        else
          (( npos++ ))
        fi ;;
    esac
  done
  if [[ -n $valueof ]]; then
    local vkey="$key|$valueof"
    kind=${_yardctl_values[$vkey]}
    vkey=".|$valueof"
    [[ -z $kind ]] && kind=${_yardctl_values[$vkey]}
  elif [[ $cur == -* ]]; then
    kind="flags"
  elif (( npos == 0 )) && [[ -n ${_yardctl_subs[$key]} ]]; then
    kind="subcommands"
  else
    local -a args
    args=( ${=ARGS} )
    if (( npos < ${#args[@]} )); then kind=${args[npos + base]}
    elif (( ${#args[@]} > 0 )) && [[ ${args[-1]} == *... ]]; then kind=${args[-1]}
    fi
    kind=${kind%...}
  fi
)";

std::string bashScript(const CompletionTree& tree) {
  std::ostringstream out;
  out << "# bash completion for yardctl " << kVersion << ", generated by `yardctl completion bash` from its\n"
      << "# command tree. Install: source <(yardctl completion bash) in ~/.bashrc, or\n"
      << "#   yardctl completion bash > /etc/bash_completion.d/yardctl\n"
      << "# Job, queue, node and dataset names come from `yardctl __complete KIND` (the master at\n"
      << "# --master on the command line, else $YARD_MASTER).\n";
  tables(out, tree, false);
  std::string walk = kWalk;
  // bash arrays start at 0 and split unquoted words by themselves.
  for (auto [from, to] : {std::pair<std::string, std::string>{"args=( ${=ARGS} )", "args=( ${_yardctl_args[$key]} )"},
                          {"args[npos + base]", "args[npos]"}}) {
    for (size_t at = walk.find(from); at != std::string::npos; at = walk.find(from, at + to.size()))
      walk.replace(at, from.size(), to);
  }
  // bash splits "--master 127.0.0.1:7700" into three words at the ':' (COMP_WORDBREAKS),
  // and --master=ADDR at the '=': the walk glues those pieces back first.
  out << "_yardctl() {\n"
      << "  local cur=${COMP_WORDS[COMP_CWORD]} piece\n"
      << "  local -a W=()\n"
      << "  local -i j first=1 cword=0 glue=0\n"
      << "  for (( j = 0; j < ${#COMP_WORDS[@]}; j++ )); do\n"
      << "    piece=${COMP_WORDS[j]}\n"
      << "    if (( ${#W[@]} > 0 )) && [[ $piece == [:=] ]] || (( glue )); then\n"
      << "      W[${#W[@]}-1]+=$piece\n"
      << "      [[ $piece == [:=] ]] && glue=1 || glue=0\n"
      << "    else\n"
      << "      W+=(\"$piece\")\n"
      << "    fi\n"
      << "    (( j == COMP_CWORD )) && cword=${#W[@]}-1\n"
      << "  done\n"
      << walk
      << "  case $kind in\n"
      << "    flags) COMPREPLY=( $(compgen -W \"${_yardctl_flags[$key]}\" -- \"$cur\") ) ;;\n"
      << "    subcommands) COMPREPLY=( $(compgen -W \"${_yardctl_subs[$key]}\" -- \"$cur\") ) ;;\n"
      << "    jobs|queues|nodes|datasets)\n"
      << "      COMPREPLY=( $(compgen -W \"$(\"${COMP_WORDS[0]}\" ${master:+--master=\"$master\"} __complete \"$kind\" "
         "2>/dev/null)\" -- \"$cur\") ) ;;\n"
      << "    files) compopt -o filenames 2>/dev/null; COMPREPLY=( $(compgen -f -- \"$cur\") ) ;;\n"
      << "    choices:*) local choices=${kind#choices:}; COMPREPLY=( $(compgen -W \"${choices//,/ }\" -- \"$cur\") ) ;;\n"
      << "    *) COMPREPLY=() ;;\n"
      << "  esac\n"
      << "}\n"
      << "complete -F _yardctl yardctl\n";
  return out.str();
}

std::string zshScript(const CompletionTree& tree) {
  std::ostringstream out;
  out << "#compdef yardctl\n"
      << "# zsh completion for yardctl " << kVersion << ", generated by `yardctl completion zsh` from its\n"
      << "# command tree. Install: yardctl completion zsh > \"${fpath[1]}/_yardctl\" (then restart zsh),\n"
      << "# or source <(yardctl completion zsh) in ~/.zshrc after compinit.\n"
      << "# Job, queue, node and dataset names come from `yardctl __complete KIND` (the master at\n"
      << "# --master on the command line, else $YARD_MASTER).\n";
  tables(out, tree, true);
  std::string walk = kWalk;
  // zsh arrays start at 1 ($words[1] is the command) and ${=...} splits a value into words.
  for (auto [from, to] : {std::pair<std::string, std::string>{"W[", "words["},
                          {"args=( ${=ARGS} )", "args=( ${=_yardctl_args[$key]} )"},
                          {"args[npos + base]", "args[npos + 1]"}}) {
    for (size_t at = walk.find(from); at != std::string::npos; at = walk.find(from, at + to.size()))
      walk.replace(at, from.size(), to);
  }
  out << "_yardctl() {\n"
      << "  local cur=${words[CURRENT]}\n"
      << "  local -i first=2 cword=$CURRENT\n"
      << walk
      << "  case $kind in\n"
      << "    flags) compadd -- ${=_yardctl_flags[$key]} ;;\n"
      << "    subcommands) compadd -- ${=_yardctl_subs[$key]} ;;\n"
      << "    jobs|queues|nodes|datasets)\n"
      << "      compadd -- ${(f)\"$(\"${words[1]}\" ${master:+--master=\"$master\"} __complete \"$kind\" 2>/dev/null)\"} ;;\n"
      << "    files) _files ;;\n"
      << "    choices:*) compadd -- ${(s:,:)${kind#choices:}} ;;\n"
      << "  esac\n"
      << "}\n"
      << "# Sourced (not autoloaded from $fpath): register; autoloaded: complete now.\n"
      << "if [[ ${funcstack[1]} == _yardctl ]]; then _yardctl \"$@\"; else compdef _yardctl yardctl; fi\n";
  return out.str();
}

// Names of one kind, one per line: what the scripts offer. Quiet on any error (a shell is
// waiting on it) and bounded in time: a master that does not answer within 2 s gives nothing.
int printNames(GlobalOptions& global, Streams io, const std::string& kind) {
  std::signal(SIGALRM, [](int) { _exit(kExitFailed); });
  alarm(3);
  auto address = masterAddress(global);
  if (!address) return kExitFailed;
  auto client = connectMaster(address.value(), std::chrono::seconds(2));
  if (!client) return kExitFailed;
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<api::Request>();
  req.setId(1);
  req.setToken(address.value().token);
  if (kind == "jobs") req.initJobList();
  else if (kind == "queues") req.setQueueList();
  else if (kind == "nodes") req.setNodeList();
  else req.setDatasetList();
  auto resp = client.value()->call(message);
  if (!resp) return kExitFailed;
  auto r = resp.value()->root<api::Response>();
  std::vector<std::string> names;
  if (r.isJobs()) for (auto j : r.getJobs()) names.push_back(j.getName().cStr());
  else if (r.isQueues()) for (auto q : r.getQueues()) names.push_back(q.getName().cStr());
  else if (r.isNodes()) for (auto n : r.getNodes()) names.push_back(n.getName().cStr());
  else if (r.isDatasets()) for (auto d : r.getDatasets()) names.push_back(d.getName().cStr());
  else return kExitFailed;
  if (jsonOutput(global)) {
    printJson(io, names);
    return kExitOk;
  }
  for (const auto& n : names) io.out << n << "\n";
  return kExitOk;
}

}  // namespace

void addCompletionCommands(CLI::App& app, GlobalOptions& global, Streams io, Action& action) {
  auto shell = std::make_shared<std::string>();
  CLI::App* completion = app.add_subcommand(
      "completion", "Print a shell completion script: source <(yardctl completion bash), or zsh");
  completion->add_option("shell", *shell, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
  completion->callback([&app, &global, io, &action, shell] {
    action = [&app, &global, io, shell] {
      CompletionTree tree;
      describe(app, "", app, tree);
      std::string script = *shell == "zsh" ? zshScript(tree) : bashScript(tree);
      if (jsonOutput(global)) printJson(io, {{"shell", *shell}, {"script", script}});
      else io.out << script;
      return kExitOk;
    };
  });

  auto kind = std::make_shared<std::string>();
  CLI::App* names = app.add_subcommand("__complete", "Names for shell completion, one per line");
  names->group("");  // hidden from help
  names->add_option("kind", *kind, "jobs, queues, nodes or datasets")
      ->required()
      ->check(CLI::IsMember({"jobs", "queues", "nodes", "datasets"}));
  names->callback([&global, io, &action, kind] { action = [&global, io, kind] { return printNames(global, io, *kind); }; });
}

}  // namespace yard::ctl
