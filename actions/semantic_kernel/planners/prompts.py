# ruff: noqa: E501  (the prompts are quoted verbatim)
"""The planners' prompts, as Semantic Kernel wrote them (quoted by the seed articles).

The templates use the prompt-function syntax (``{{$name}}``) and are rendered with
:class:`~actions.prompt_function.PromptTemplate`. The function manuals each planner
shows the model are rendered here too, in the format its prompt expects.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...tools import KernelFunction

# -------------------------------------------------------------- sequential (XML)
SEQUENTIAL_PLANNER_PROMPT = """Create an XML plan step by step, to satisfy the goal given, with the available functions.

[AVAILABLE FUNCTIONS]

{{$available_functions}}

[END AVAILABLE FUNCTIONS]

To create a plan, follow these steps:
0. The plan should be as short as possible.
1. From a <goal> create a <plan> as a series of <functions>.
2. A plan has 'INPUT' available in context variables by default.
3. Before using any function in a plan, check that it is present in the [AVAILABLE FUNCTIONS] list. If it is not, do not use it.
4. Only use functions that are required for the given goal.
5. Append an "END" XML comment at the end of the plan after the final closing </plan> tag.
6. Always output valid XML that can be parsed by an XML parser.
7. If a plan cannot be created with the [AVAILABLE FUNCTIONS], return <plan />.

All plans take the form of:
<plan>
    <!-- ... reason for taking step ... -->
    <function.{FullyQualifiedFunctionName} ... />
    <!-- ... reason for taking step ... -->
    <function.{FullyQualifiedFunctionName} ... />
    <!-- ... reason for taking step ... -->
    <function.{FullyQualifiedFunctionName} ... />
    (... etc ...)
</plan>
<!-- END -->

To call a function, follow these steps:
1. A function has one or more named parameters and a single 'output' which are all strings. Parameter values should be xml escaped.
2. To save an 'output' from a <function>, to pass into a future <function>, use <function.{FullyQualifiedFunctionName} ... setContextVariable="<UNIQUE_VARIABLE_KEY>"/>
3. To save an 'output' from a <function>, to return as part of a plan result, use <function.{FullyQualifiedFunctionName} ... appendToResult="RESULT__<UNIQUE_RESULT_KEY>"/>
4. Use a '$' to reference a context variable in a parameter, e.g. when `INPUT='world'` the parameter 'Hello $INPUT' will evaluate to `Hello world`.
5. Functions do not have access to the context variables of other functions. Do not attempt to use context variables as arrays or objects. Instead, use available functions to extract specific elements or properties from context variables.

DO NOT DO THIS, THE PARAMETER VALUE IS NOT XML ESCAPED:
<function.Name4 input="$SOME_PREVIOUS_OUTPUT" parameter_name="some value with a <!-- 'comment' in it-->"/>

DO NOT DO THIS, THE PARAMETER VALUE IS ATTEMPTING TO USE A CONTEXT VARIABLE AS AN ARRAY/OBJECT:
<function.CallFunction input="$OTHER_OUTPUT[1]"/>

Here is a valid example of how to call a function "_Function_.Name" with a single input and save its output:
<function._Function_.Name input="this is my input" setContextVariable="SOME_KEY"/>

Here is a valid example of how to call a function "FunctionName2" with a single input and return its output as part of the plan result:
<function.FunctionName2 input="Hello $INPUT" appendToResult="RESULT__FINAL_ANSWER"/>

Here is a valid example of how to call a function "Name3" with multiple inputs:
<function.Name3 input="$SOME_PREVIOUS_OUTPUT" parameter_name="some value with a &lt;!-- &apos;comment&apos; in it--&gt;"/>

Begin!

<goal>{{$input}}</goal>
"""

SEQUENTIAL_STOP = "<!-- END -->"

SEQUENTIAL_FIX = (
    "That plan cannot be used: {error}\n"
    "Write the whole plan again as valid XML: <plan> with one <function.Plugin.Function .../> "
    "element per step (only functions from [AVAILABLE FUNCTIONS]), then </plan>."
)

# ------------------------------------------------------------------ basic (JSON)
BASIC_PLANNER_PROMPT = """You are a planner for the Semantic Kernel.
Your job is to create a properly formatted JSON plan step by step, to satisfy the goal given.
Create a list of subtasks based off the [GOAL] provided.
Each subtask must be from within the [AVAILABLE FUNCTIONS] list. Do not use any functions that are not in the list.
Base your decisions on which functions to use from the description and the name of the function.
Sometimes, a function may take arguments. Provide them if necessary.
The plan should be as short as possible.
For example:

[AVAILABLE FUNCTIONS]
EmailConnector.LookupContactEmail
description: looks up the a contact and retrieves their email address
args:
- name: the name to look up

WriterPlugin.EmailTo
description: email the input text to a recipient
args:
- input: the text to email
- recipient: the recipient's email address. Multiple addresses may be included if separated by ';'.

WriterPlugin.Translate
description: translate the input to another language
args:
- input: the text to translate
- language: the language to translate to

WriterPlugin.Summarize
description: summarize input text
args:
- input: the text to summarize

FunPlugin.Joke
description: Generate a funny joke
args:
- input: the input to generate a joke about

[GOAL]
"Tell a joke about cars. Translate it to Spanish"

[OUTPUT]
    {
        "input": "cars",
        "subtasks": [
            {"function": "FunPlugin.Joke"},
            {"function": "WriterPlugin.Translate", "args": {"language": "Spanish"}}
        ]
    }

[AVAILABLE FUNCTIONS]
{{$available_functions}}

[GOAL]
{{$goal}}

[OUTPUT]
"""

JSON_FIX = "That plan cannot be used: {error}\nAnswer again with the corrected JSON plan only."

# ----------------------------------------------------------------- action (JSON)
ACTION_PLANNER_PROMPT = """A planner takes a list of functions, a goal, and chooses which function to use.
For each function the list includes details about the input parameters.
[START OF EXAMPLES]
{{$good_examples}}
{{$edge_case_examples}}
[END OF EXAMPLES]
[REAL SCENARIO STARTS HERE]
- List of functions:
{{$list_of_functions}}
- End list of functions.
Goal: {{$goal}}
"""

ACTION_GOOD_EXAMPLES = """[EXAMPLE]
- List of functions:
// Get the current time.
TimePlugin.Time
No parameters.
// Makes a POST request to a uri.
HttpPlugin.PostAsync
Parameter "body": The body of the request.
- End list of functions.
Goal: get the current time.
{"plan":{
"rationale": "the list contains a function that gets the current time (now)",
"function": "TimePlugin.Time"
}}
#END-OF-PLAN"""

ACTION_EDGE_CASE_EXAMPLES = """[EXAMPLE]
- List of functions:
// Get the current time.
TimePlugin.Time
No parameters.
// Write a file.
FileIOPlugin.WriteAsync
Parameter "path": Destination file. (default value: sample.txt)
Parameter "content": File content.
// Makes a POST request to a uri.
HttpPlugin.PostAsync
Parameter "body": The body of the request.
- End list of functions.
Goal: tell me a joke.
{"plan":{
"rationale": "the list does not contain functions to tell jokes or something funny",
"function": "",
"parameters": {
}}}
#END-OF-PLAN"""

ACTION_STOP = "#END-OF-PLAN"


# ------------------------------------------------------------------- manuals
def render_basic_manual(functions: Iterable[KernelFunction]) -> str:
    """The basic planner's manual: ``Plugin.Fn`` / ``description:`` / ``args:`` / ``- name: desc``."""
    blocks = []
    for f in functions:
        lines = [f.full_name, f"description: {f.description}", "args:"]
        lines += [f"- {p.name}: {p.description}".rstrip() for p in f.parameters]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_action_manual(functions: Iterable[KernelFunction]) -> str:
    """The action planner's list: ``// description``, ``Plugin.Fn``, ``Parameter "x": ...``."""
    lines: list[str] = []
    for f in functions:
        lines += [f"// {f.description}", f.full_name]
        if not f.parameters:
            lines.append("No parameters.")
        for p in f.parameters:
            has_default = not p.required and p.default not in (None, "")
            default = f" (default value: {p.default})" if has_default else ""
            lines.append(f'Parameter "{p.name}": {(p.description + default).strip()}'.rstrip())
    return "\n".join(lines)


__all__ = [
    "ACTION_EDGE_CASE_EXAMPLES",
    "ACTION_GOOD_EXAMPLES",
    "ACTION_PLANNER_PROMPT",
    "ACTION_STOP",
    "BASIC_PLANNER_PROMPT",
    "JSON_FIX",
    "SEQUENTIAL_FIX",
    "SEQUENTIAL_PLANNER_PROMPT",
    "SEQUENTIAL_STOP",
    "render_action_manual",
    "render_basic_manual",
]
